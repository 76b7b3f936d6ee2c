package billing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
)

// Vault is billing's access to the vault (I3): the issuer that issues, renews
// and settles keys, and the proxy that every payment request goes through.
// Charge builds its stripe-go client from a key's credential pointed at the
// proxy, so billing holds no Stripe secret and no code path of it reaches
// Stripe without a capped key.
type Vault struct {
	issuer   *vault.Issuer
	signing  []byte
	proxyURL string
	hc       *http.Client
}

// NewVault returns billing's vault access. proxyURL is the root URL of the
// VaultProxy function (scheme and host, no path; "" for a Service that issues
// keys but does not charge): given a base URL with a path,
// stripe-go v82.5.1 sends the request and only then fails ("unknown path
// prefix"), so a payment would happen behind an error. hc carries the request
// timeout and, in the cloud, the transport adding the caller's ID token; nil
// means a client with a 30 s timeout.
func NewVault(issuer *vault.Issuer, signingSecret []byte, proxyURL string, hc *http.Client) (*Vault, error) {
	var problems []error
	if issuer == nil {
		problems = append(problems, errors.New("an issuer is required"))
	}
	if len(signingSecret) < 32 {
		problems = append(problems, errors.New("the signing secret must be at least 32 bytes"))
	}
	if proxyURL != "" {
		if err := checkProxyURL(proxyURL); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("billing vault: %w", errors.Join(problems...))
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Vault{issuer: issuer, signing: slices.Clone(signingSecret), proxyURL: proxyURL, hc: hc}, nil
}

// checkProxyURL checks that u is an http(s) URL with no path but "/".
func checkProxyURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("vault proxy URL %q: want an http(s) URL", u)
	}
	if (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.Fragment != "" {
		return fmt.Errorf("vault proxy URL %q: want the root of the proxy's URL, with no path", u)
	}
	return nil
}

// client is a stripe-go client that spends through ref's key only.
func (v *Vault) client(ref string) *stripe.Client {
	return NewStripeClient(vault.Credential(v.signing, ref), v.proxyURL, v.hc)
}

// Budget is a run's budget as the vault enforces it, in minor units summed
// over the run's keys.
type Budget struct {
	Total    int64 `json:"total"`
	Used     int64 `json:"used"`
	Expected int64 `json:"expected"`
}

func (b Budget) data() store.Data {
	return store.Data{"total": b.Total, "used": b.Used, "expected": b.Expected}
}

// usableKey resolves the key reference a Charge call was given into the
// current generation of that key, checking it belongs to the charge's period
// and customer. A superseded or expired key is renewed (F16): the next
// generation keeps the cap and what was spent or reserved, so renewal never
// uncaps anything. A key an operator revoked is ErrKeyRevoked.
func (v *Vault) usableKey(ctx context.Context, req ChargeRequest, now time.Time) (string, error) {
	ks, err := v.issuer.Key(ctx, req.KeyRef)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, vault.ErrUnknownKey) {
		return "", fmt.Errorf("%w: key_ref names no vault key", ErrInvalidInput)
	}
	if err != nil {
		return "", err
	}
	if ks.Period != req.Period || ks.Customer != req.CustomerID {
		return "", fmt.Errorf("%w: key_ref belongs to another period or customer", ErrInvalidInput)
	}
	if ks.SupersededBy == "" && ks.Revoked {
		return "", fmt.Errorf("key %s: %s: %w", req.KeyRef, ks.RevokeReason, vault.ErrKeyRevoked)
	}
	if ks.SupersededBy == "" && now.Before(ks.ExpiresAt) {
		return req.KeyRef, nil
	}
	return v.renew(ctx, req.KeyRef)
}

// renew returns the current generation of ref's key, issuing the next one if
// it has expired.
func (v *Vault) renew(ctx context.Context, ref string) (string, error) {
	is, err := v.issuer.Renew(ctx, ref)
	if err != nil {
		return "", err
	}
	return is.KeyRef, nil
}
