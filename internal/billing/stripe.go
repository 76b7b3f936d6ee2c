package billing

import (
	"net/http"
	"strings"

	"github.com/stripe/stripe-go/v82"
)

// NewStripeClient builds a stripe-go client for billrun: baseURL "" means
// Stripe itself; hc carries the request timeout. The SDK never retries
// (MaxNetworkRetries 0): billrun owns retries, because stripe-go skips some
// retryable answers (a JSON 500, a 409 key in use) and would invent an
// idempotency key of its own. The SDK's logger is silenced; billrun logs its
// own decisions. Charge uses it only through Vault, with a key's credential
// pointed at the vault proxy; tools use it to seed the simulator.
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
