package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"billrun.dev/billrun/internal/store"
)

// Proxy defaults.
const (
	// DefaultStripeURL is Stripe's API base.
	DefaultStripeURL = "https://api.stripe.com"
	// DefaultUpstreamTimeout matches stripe-go's own HTTP timeout.
	DefaultUpstreamTimeout = 80 * time.Second
	// DefaultMaxBodyBytes bounds a request body; a PaymentIntent creation with
	// metadata is well under 10 KB.
	DefaultMaxBodyBytes = 64 << 10
	// maxResponseBytes bounds what is read back from Stripe (a list page of 100
	// PaymentIntents is well under this).
	maxResponseBytes = 16 << 20
)

// ProxyConfig configures the proxy. Zero values take the defaults above.
type ProxyConfig struct {
	// Store holds the key documents; required.
	Store store.Backend
	// StripeURL is where requests are forwarded; "" means DefaultStripeURL.
	StripeURL string
	// StripeSecret gives the real Stripe key; required.
	StripeSecret SecretSource
	// SigningSecret is the Issuer's; required, at least 32 bytes.
	SigningSecret []byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// Client talks to Stripe; nil means a client with UpstreamTimeout.
	Client *http.Client
	// UpstreamTimeout bounds one forwarded call, which runs on even if the
	// caller hangs up so that a sent payment is settled; 0 means
	// DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

type proxy struct {
	cfg   ProxyConfig
	base  *url.URL
	locks keyLocks
}

// NewProxy returns the spend-cap proxy: an http.Handler speaking the part of
// Stripe's API that Charge uses, at which Charge points stripe-go with
// Credential(signingSecret, keyRef) as its API key.
func NewProxy(cfg ProxyConfig) (http.Handler, error) {
	var problems []string
	if cfg.Store == nil {
		problems = append(problems, "Store is required")
	}
	if cfg.StripeSecret == nil {
		problems = append(problems, "StripeSecret is required")
	}
	if len(cfg.SigningSecret) < 32 {
		problems = append(problems, "SigningSecret must be at least 32 bytes")
	}
	if cfg.StripeURL == "" {
		cfg.StripeURL = DefaultStripeURL
	}
	base, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(cfg.StripeURL, "/"), "/v1"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		problems = append(problems, fmt.Sprintf("StripeURL %q is not an http(s) URL", cfg.StripeURL))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UpstreamTimeout == 0 {
		cfg.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.UpstreamTimeout}
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.UpstreamTimeout < 0 || cfg.MaxBodyBytes < 0 {
		problems = append(problems, "UpstreamTimeout and MaxBodyBytes must be positive")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("vault proxy config: %s: %w", strings.Join(problems, "; "), ErrInvalid)
	}
	cfg.SigningSecret = slices.Clone(cfg.SigningSecret)
	return &proxy{cfg: cfg, base: base}, nil
}

// settledKept is logged when a forwarded request's reservation is left as it
// was, because Stripe's answer does not say whether money moved.
const settledKept = "kept"

// exchange is one request's story, logged as one line.
type exchange struct {
	endpoint string
	ref      string
	charge   charge
	reserved bool
	status   int    // Stripe's status, 0 if not forwarded
	settled  string // reservation state after settlement
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var ex exchange
	err := p.serve(w, r, &ex)
	attrs := []any{
		"method", r.Method, "path", r.URL.Path, "endpoint", ex.endpoint, "key", ex.ref,
		"customer", ex.charge.Customer, "idempotency_key", ex.charge.IdempotencyKey,
		"amount", ex.charge.Amount, "currency", ex.charge.Currency,
		"reserved", ex.reserved, "stripe_status", ex.status, "settled", ex.settled,
		"duration_ms", time.Since(start).Milliseconds(),
	}
	if err == nil {
		p.cfg.Logger.Info("vault proxy: forwarded", attrs...)
		return
	}
	rf, ok := lookupRefusal(err)
	if !ok {
		// A store failure becomes a retryable 503; anything else is a bug whose
		// details stay in the log.
		rf = refusal{err: err, code: "vault_internal_error", status: http.StatusInternalServerError}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			rf, _ = lookupRefusal(ErrUnavailable)
		}
	}
	attrs = append(attrs, "code", rf.code, "error", err.Error())
	if rf.status >= 500 {
		p.cfg.Logger.Error("vault proxy: failed", attrs...)
	} else {
		p.cfg.Logger.Warn("vault proxy: refused", attrs...)
	}
	msg := err.Error()
	if rf.code == "vault_internal_error" {
		msg = "internal error in the vault proxy"
	}
	writeRefusal(w, rf, msg)
}

// writeRefusal answers in Stripe's error shape, so stripe-go returns a
// *stripe.Error whose Code is the refusal's code.
func writeRefusal(w http.ResponseWriter, rf refusal, msg string) {
	typ := "invalid_request_error"
	if rf.status >= 500 {
		typ = "api_error"
		w.Header().Set("Retry-After", "1")
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"type": typ, "code": rf.code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	// Refusals are decisions, not glitches: tell stripe-go not to repeat them.
	if rf.status < 500 {
		w.Header().Set("Stripe-Should-Retry", "false")
	}
	w.WriteHeader(rf.status)
	_, _ = w.Write(body)
}

// endpointOf names the endpoint a request calls, or "" for any other.
func endpointOf(method, path string) string {
	const pis = "/v1/payment_intents"
	switch {
	case path == pis && method == http.MethodPost:
		return EndpointCreatePaymentIntent
	case path == pis && method == http.MethodGet:
		return EndpointListPaymentIntents
	case method == http.MethodGet && strings.HasPrefix(path, pis+"/"):
		if id := strings.TrimPrefix(path, pis+"/"); id != "" && !strings.Contains(id, "/") {
			return EndpointGetPaymentIntent
		}
	}
	return ""
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request, ex *exchange) error {
	credential, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer credential: %w", ErrUnknownKey)
	}
	credential = strings.TrimSpace(credential)
	ref, ok := parseCredential(p.cfg.SigningSecret, credential)
	if !ok {
		// Never logged or echoed: a near miss is most of a credential.
		return fmt.Errorf("credential does not verify: %w", ErrUnknownKey)
	}
	ex.ref = ref
	ex.endpoint = endpointOf(r.Method, r.URL.Path)
	now := p.cfg.Now().UTC()

	if ex.endpoint != EndpointCreatePaymentIntent {
		// Reads spend nothing, so a plain read of the key authorizes them; an
		// unknown endpoint is refused only after authentication, so a stranger
		// learns nothing about what exists.
		k, err := readKey(r.Context(), p.cfg.Store, ref)
		if err != nil {
			return err
		}
		if err := authorize(k, credential, ex.endpoint, now); err != nil {
			return err
		}
		ex.charge.Customer = k.Stripe
		return p.read(w, r, k, ex)
	}
	// A connected-account header would move the charge to another account.
	if r.Header.Get("Stripe-Account") != "" || r.Header.Get("Stripe-Context") != "" {
		return fmt.Errorf("Stripe-Account and Stripe-Context are not allowed: %w", ErrEndpointNotAllowed)
	}
	c, body, err := p.parseCharge(w, r)
	ex.charge = c
	if err != nil {
		return err
	}
	secret, err := p.cfg.StripeSecret.StripeSecret(r.Context())
	if err != nil {
		return fmt.Errorf("stripe secret: %w: %w", ErrUnavailable, err)
	}

	// The key's budget shard never changes, across renewals too: read it to
	// queue behind this instance's other transactions on that shard.
	k, err := readKey(r.Context(), p.cfg.Store, ref)
	if err != nil {
		return err
	}
	unlock := p.locks.lock(k.BudgetShard)
	err = p.cfg.Store.RunTransaction(r.Context(), func(ctx context.Context, tx store.Tx) error {
		var err error
		ex.reserved, err = reserve(ctx, tx, ref, credential, c, now)
		return err
	})
	unlock()
	if err != nil {
		return err
	}

	// From here the request may reach Stripe: finish it and settle even if the
	// caller hangs up, so that its outcome is known rather than indeterminate.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.cfg.UpstreamTimeout)
	defer cancel()
	resp, err := p.forward(ctx, r, secret, body)
	if err != nil {
		ex.settled = settledKept
		return err
	}
	ex.status = resp.status
	ex.settled = settledKept
	if o, definite := outcomeOf(resp.status); definite {
		unlock := p.locks.lock(k.BudgetShard)
		err := p.cfg.Store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
			var err error
			ex.settled, err = settle(ctx, tx, ref, c.IdempotencyKey, o, p.cfg.Now().UTC())
			return err
		})
		unlock()
		if err != nil {
			// Stripe's answer still goes back: the money has moved or not
			// whatever the store says. The reservation stays pending, which
			// over-counts and is settled by the next replay or Reconcile.
			ex.settled = settledKept
			p.cfg.Logger.Error("vault proxy: settle failed; reservation left pending",
				"key", ref, "idempotency_key", c.IdempotencyKey, "stripe_status", resp.status, "error", err.Error())
		}
	}
	resp.write(w)
	return nil
}

// outcomeOf tells a definite outcome from an indeterminate one. Only a 2xx is a
// success and only a 402 (card error) a definite failure: a 409 (key in use),
// 429, 5xx, or a 400 idempotency_error may hide a payment that happened.
func outcomeOf(status int) (Outcome, bool) {
	switch {
	case status >= 200 && status < 300:
		return Succeeded, true
	case status == http.StatusPaymentRequired:
		return Failed, true
	}
	return 0, false
}

// parseCharge reads and checks a PaymentIntent creation. The body is forwarded
// byte for byte, so what the vault checked is exactly what Stripe receives.
func (p *proxy) parseCharge(w http.ResponseWriter, r *http.Request) (charge, []byte, error) {
	c := charge{IdempotencyKey: strings.TrimSpace(r.Header.Get("Idempotency-Key"))}
	if c.IdempotencyKey == "" {
		return c, nil, fmt.Errorf("a payment request needs an Idempotency-Key: %w", ErrIdempotencyKeyRequired)
	}
	if len(c.IdempotencyKey) > 255 {
		return c, nil, fmt.Errorf("Idempotency-Key longer than 255 characters: %w", ErrBadRequest)
	}
	if r.URL.RawQuery != "" {
		// Parameters in the query would escape the checks on the body.
		return c, nil, fmt.Errorf("query parameters on a POST: %w", ErrBadRequest)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return c, nil, fmt.Errorf("content type %q, want application/x-www-form-urlencoded: %w", r.Header.Get("Content-Type"), ErrBadRequest)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return c, nil, fmt.Errorf("body over %d bytes: %w", p.cfg.MaxBodyBytes, ErrBodyTooLarge)
		}
		return c, nil, fmt.Errorf("read body: %w: %w", ErrBadRequest, err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return c, nil, fmt.Errorf("parse body: %w: %w", ErrBadRequest, err)
	}
	one := func(name string) (string, error) {
		if v := form[name]; len(v) == 1 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("want exactly one %s, got %d: %w", name, len(form[name]), ErrBadRequest)
	}
	if c.Customer, err = one("customer"); err != nil {
		return c, nil, err
	}
	cur, err := one("currency")
	if err != nil {
		return c, nil, err
	}
	// Stripe treats currency codes case-insensitively.
	c.Currency = strings.ToLower(cur)
	amount, err := one("amount")
	if err != nil {
		return c, nil, err
	}
	c.Amount, err = strconv.ParseInt(amount, 10, 64)
	if err != nil || c.Amount <= 0 || c.Amount > MaxAmount {
		return c, nil, fmt.Errorf("amount %q is not a positive integer: %w", amount, ErrBadRequest)
	}
	return c, body, nil
}

// upstream is Stripe's answer, read in full before anything is settled.
type upstream struct {
	status int
	header http.Header
	body   []byte
}

// hopByHop headers belong to one connection and are not passed on.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer", "Content-Length"}

func (u *upstream) write(w http.ResponseWriter) {
	for name, values := range u.header {
		if slices.Contains(hopByHop, name) {
			continue
		}
		w.Header()[name] = values
	}
	w.WriteHeader(u.status)
	_, _ = w.Write(u.body)
}

// forwardHeaders are passed from the caller to Stripe; everything else, above
// all the caller's Authorization, is dropped.
var forwardHeaders = []string{"Content-Type", "Idempotency-Key", "Stripe-Version", "User-Agent", "X-Stripe-Client-User-Agent", "Accept"}

func (p *proxy) forward(ctx context.Context, r *http.Request, secret string, body []byte) (*upstream, error) {
	target := *p.base
	target.Path = strings.TrimSuffix(p.base.Path, "/") + r.URL.Path
	target.RawQuery = r.URL.RawQuery
	req, err := http.NewRequestWithContext(ctx, r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for _, h := range forwardHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = slices.Clone(v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %w", r.Method, r.URL.Path, ErrUpstream, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w: %w", r.Method, r.URL.Path, ErrUpstream, err)
	}
	return &upstream{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// read forwards a PaymentIntent read, restricted to the key's customer.
func (p *proxy) read(w http.ResponseWriter, r *http.Request, k keyRecord, ex *exchange) error {
	if ex.endpoint == EndpointListPaymentIntents {
		if c := r.URL.Query()["customer"]; len(c) != 1 || c[0] != k.Stripe {
			return fmt.Errorf("key %s lists only customer %s's PaymentIntents: %w", k.Ref, k.Stripe, ErrCustomerMismatch)
		}
	}
	secret, err := p.cfg.StripeSecret.StripeSecret(r.Context())
	if err != nil {
		return fmt.Errorf("stripe secret: %w: %w", ErrUnavailable, err)
	}
	resp, err := p.forward(r.Context(), r, secret, nil)
	if err != nil {
		return err
	}
	ex.status = resp.status
	if ex.endpoint == EndpointGetPaymentIntent && resp.status == http.StatusOK {
		if owner := customerOf(resp.body); owner != k.Stripe {
			return fmt.Errorf("key %s reads only customer %s's PaymentIntents: %w", k.Ref, k.Stripe, ErrCustomerMismatch)
		}
	}
	resp.write(w)
	return nil
}

// customerOf returns a PaymentIntent's customer id, whether or not expanded.
func customerOf(body []byte) string {
	var pi struct {
		Customer json.RawMessage `json:"customer"`
	}
	if json.Unmarshal(body, &pi) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(pi.Customer, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(pi.Customer, &obj) == nil {
		return obj.ID
	}
	return ""
}
