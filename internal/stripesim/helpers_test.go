package stripesim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

const testKey = "sk_test_simulator"

// t0 is the simulator's start time in tests: near real time, so that webhook
// signatures pass stripe-go's default five-minute tolerance.
func t0() time.Time { return time.Now().UTC().Truncate(time.Second) }

// sim is a running simulator with a real stripe-go client pointed at it.
type sim struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	clock  *ManualClock
	client *stripe.Client
}

type simOpt func(*Config)

// setFaults switches faults on, typically after a scenario's setup.
func (s *sim) setFaults(spec string) {
	s.t.Helper()
	f, err := ParseFaults(spec)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.srv.SetFaults(f); err != nil {
		s.t.Fatal(err)
	}
}

func newSim(t *testing.T, opts ...simOpt) *sim {
	t.Helper()
	clock := NewManualClock(t0())
	cfg := Config{Clock: clock, Seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	s := &sim{t: t, srv: srv, ts: ts, clock: clock}
	s.client = s.newClient(0, nil)
	return s
}

// newClient returns a stripe-go client with the given SDK retries; httpClient
// nil means stripe-go's default.
func (s *sim) newClient(retries int64, httpClient *http.Client) *stripe.Client {
	cfg := &stripe.BackendConfig{
		URL:               stripe.String(s.ts.URL),
		MaxNetworkRetries: stripe.Int64(retries),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:        httpClient,
	}
	return stripe.NewClient(testKey, stripe.WithBackends(stripe.NewBackendsWithConfig(cfg)))
}

// customer creates a customer with pm (a test payment method id) attached and
// returns the customer id and the saved payment method id.
func (s *sim) customer(pm string) (string, string) {
	s.t.Helper()
	ctx := context.Background()
	c, err := s.client.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	if err != nil {
		s.t.Fatalf("create customer: %v", err)
	}
	saved, err := s.client.V1PaymentMethods.Attach(ctx, pm, &stripe.PaymentMethodAttachParams{Customer: stripe.String(c.ID)})
	if err != nil {
		s.t.Fatalf("attach %s: %v", pm, err)
	}
	return c.ID, saved.ID
}

// chargeParams are billrun's off-session charge shape (internal/billing's
// createParams: these parameters and its metadata keys).
func chargeParams(cust, pm, key string, amount int64) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
		Customer: stripe.String(cust), PaymentMethod: stripe.String(pm),
		Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
	}
	p.AddMetadata("billrun_period", "2026-10")
	p.AddMetadata("billrun_customer", cust)
	if key != "" {
		p.AddMetadata("billrun_key", key)
		p.SetIdempotencyKey(key)
	}
	return p
}

func (s *sim) charge(cust, pm, key string, amount int64) (*stripe.PaymentIntent, error) {
	return s.client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, key, amount))
}

// raw sends a raw form request, for what stripe-go would refuse to send.
func (s *sim) raw(method, path, auth string, form url.Values, header map[string]string) (int, string, http.Header) {
	s.t.Helper()
	var body io.Reader
	target := s.ts.URL + path
	if method == http.MethodGet {
		if len(form) > 0 {
			target += "?" + form.Encode()
		}
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("want *stripe.Error, got %T: %v", err, err)
	}
	return se
}

func (s *sim) ledger() []Payment { return s.srv.Ledger() }

// countRequests counts logged requests for an idempotency key.
func (s *sim) countRequests(key string) int {
	n := 0
	for _, r := range s.srv.Requests() {
		if r.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// waitInFlight waits until a request with key is executing in the simulator.
func (s *sim) waitInFlight(key string) {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s.srv.mu.Lock()
		in := s.srv.inflight[key]
		s.srv.mu.Unlock()
		if in {
			return
		}
		time.Sleep(time.Millisecond)
	}
	s.t.Fatalf("key %q never in flight", key)
}
