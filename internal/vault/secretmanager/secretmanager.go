// Package secretmanager gives the vault proxy its Stripe secret from Google
// Secret Manager, in the cloud. Locally the proxy uses vault.StaticSecret.
package secretmanager

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/option"
	sm "google.golang.org/api/secretmanager/v1"

	"billrun.dev/billrun/internal/vault"
)

// DefaultTTL is how long a secret read is reused: a rotation reaches every
// proxy instance within this time, and the proxy does not call Secret Manager
// on every payment.
const DefaultTTL = 5 * time.Minute

var versionName = regexp.MustCompile(`^projects/[^/]+/secrets/[^/]+/versions/[^/]+$`)

// Source reads one secret version, for example
// "projects/billrun-prod/secrets/stripe-secret-key/versions/latest".
type Source struct {
	svc  *sm.Service
	name string
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex
	value   string
	fetched time.Time
}

var _ vault.SecretSource = (*Source)(nil)

// New returns a Source for the secret version name; opts reach the API client
// (credentials come from the environment by default: the function's service
// account, which needs roles/secretmanager.secretAccessor on that secret only).
// ttl 0 means DefaultTTL; now nil means time.Now.
func New(ctx context.Context, name string, ttl time.Duration, now func() time.Time, opts ...option.ClientOption) (*Source, error) {
	if !versionName.MatchString(name) {
		return nil, fmt.Errorf("secretmanager: %q is not projects/P/secrets/S/versions/V", name)
	}
	svc, err := sm.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("secretmanager: client: %w", err)
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Source{svc: svc, name: name, ttl: ttl, now: now}, nil
}

// StripeSecret returns the secret, read at most once per TTL. Surrounding
// whitespace (a trailing newline from `gcloud secrets create --data-file`) is
// trimmed: a Stripe key never contains any.
func (s *Source) StripeSecret(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.value != "" && s.now().Sub(s.fetched) < s.ttl {
		return s.value, nil
	}
	resp, err := s.svc.Projects.Secrets.Versions.Access(s.name).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("secretmanager: access %s: %w", s.name, err)
	}
	if resp.Payload == nil {
		return "", fmt.Errorf("secretmanager: access %s: %w", s.name, errors.New("no payload"))
	}
	raw, err := base64.StdEncoding.DecodeString(resp.Payload.Data)
	if err != nil {
		// Not the decoder's message: it quotes the offending input.
		return "", fmt.Errorf("secretmanager: access %s: payload is not base64", s.name)
	}
	v := strings.TrimSpace(string(raw))
	if v == "" {
		return "", fmt.Errorf("secretmanager: access %s: empty secret", s.name)
	}
	s.value, s.fetched = v, s.now()
	return v, nil
}

// String keeps the secret out of anything that prints a Source.
func (s *Source) String() string { return "secretmanager.Source(" + s.name + ")" }
