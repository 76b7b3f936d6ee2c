package billing

import (
	"context"
	"net/http"
	"strings"

	"github.com/stripe/stripe-go/v82"
)

// ChargeRef names the charge a Stripe client is wanted for.
type ChargeRef struct {
	Period     string
	CustomerID string
	// KeyRef is the vault key reference the caller passed, if any.
	KeyRef string
}

// Clients gives the stripe-go client to use for one charge. Direct access serves
// every charge with one client holding the secret key; the vault points the
// client at its proxy with a per-charge credential derived from KeyRef, so the
// charging function holds no Stripe secret.
type Clients interface {
	StripeClient(ctx context.Context, ref ChargeRef) (*stripe.Client, error)
}

// Direct serves every charge with one client.
type Direct struct{ Client *stripe.Client }

// StripeClient returns the one client.
func (d Direct) StripeClient(context.Context, ChargeRef) (*stripe.Client, error) {
	return d.Client, nil
}

// NewStripeClient builds a stripe-go client for billrun: baseURL "" means
// Stripe itself; hc carries the request timeout. The SDK never retries
// (MaxNetworkRetries 0): billrun owns retries, because stripe-go skips some
// retryable answers (a JSON 500, a 409 key in use) and would invent an
// idempotency key of its own. The SDK's logger is silenced; billrun logs its
// own decisions.
func NewStripeClient(key, baseURL string, hc *http.Client) *stripe.Client {
	cfg := &stripe.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if baseURL = strings.TrimSpace(baseURL); baseURL != "" {
		cfg.URL = stripe.String(baseURL)
	}
	return stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(cfg)))
}
