package vault

import (
	"context"
	"errors"
	"log/slog"
)

// SecretSource gives the proxy the real Stripe secret key. Locally it is a
// StaticSecret read from STRIPE_SECRET_KEY by the caller; in the cloud an
// implementation reads Secret Manager (and may cache). The proxy asks for it on
// every forwarded request and never logs or returns it.
type SecretSource interface {
	StripeSecret(ctx context.Context) (string, error)
}

// StaticSecret is a SecretSource holding the key itself. It prints as
// "[redacted]" with fmt and slog, so a config dump cannot leak it.
type StaticSecret string

// StripeSecret returns the key, or an error when it is empty.
func (s StaticSecret) StripeSecret(context.Context) (string, error) {
	if s == "" {
		return "", errors.New("vault: no stripe secret configured")
	}
	return string(s), nil
}

func (StaticSecret) String() string       { return "[redacted]" }
func (StaticSecret) GoString() string     { return "[redacted]" }
func (StaticSecret) LogValue() slog.Value { return slog.StringValue("[redacted]") }
