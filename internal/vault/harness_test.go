package vault_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/firestoredb/emulator"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

const period = "2026-10"

// quiet keeps stripe-go from printing every expected refusal.
var quiet = &stripe.LeveledLogger{Level: stripe.LevelNull}

var start = time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)

// lockedBuffer collects log lines from concurrent handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recorder keeps every response a client received through the proxy, headers
// and body, for the secret scan.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.seen, "%d %v\n%s\n", resp.StatusCode, resp.Header, body)
	return resp, nil
}

// env is the whole path under test: the issuer and the proxy on one store, the
// proxy served over real HTTP and forwarding over real HTTP to the Stripe
// simulator, and stripe-go clients pointed at the proxy.
type env struct {
	t            *testing.T
	clock        *stripesim.ManualClock
	dataDir      string
	store        store.Backend
	sim          *stripesim.Server
	simURL       string
	proxyURL     string   // the first instance
	proxyURLs    []string // every instance; clients take turns
	turn         atomic.Int64
	issuer       *vault.Issuer
	signing      []byte
	stripeSecret string
	logs         *lockedBuffer
	responses    *recorder
	http         *http.Client
	direct       *stripe.Client // straight to the simulator, for setup
	busy         atomic.Int64   // 503 vault_unavailable answers retried
}

type envOptions struct {
	issuer       vault.IssuerConfig // Store, SigningSecret and Now are filled in
	faults       stripesim.Faults
	stripeSecret string
	signing      []byte
	// instances is the number of proxy instances; 0 means 1.
	instances int
	// simDataDir keeps the simulator's journal in the data directory.
	simDataDir bool
	// upstream wraps the proxy's transport to Stripe, for faults on the wire.
	upstream func(http.RoundTripper) http.RoundTripper
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// emulators shares one Firestore emulator among this binary's tests.
var emulators emulator.Pool

func TestMain(m *testing.M) {
	code := m.Run()
	if err := emulators.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// backend is a store the scenarios run on. The embedded store runs them at full
// size; Firestore's emulator (about 230 transactions/s on two cores) at a size
// that keeps the package well under a minute.
type backend struct {
	name string
	// open returns the store for one test; nil means the embedded store in the
	// test's data directory.
	open func(t *testing.T) store.Backend
	// full is false when scenarios run reduced.
	full bool
}

// size returns full on a full-size backend, reduced otherwise.
func (b backend) size(full, reduced int) int {
	if b.full {
		return full
	}
	return reduced
}

// eachBackend runs a scenario on the embedded store and on Firestore's
// emulator; the latter skips when the emulator cannot run, unless
// BILLRUN_REQUIRE_EMULATORS=1.
func eachBackend(t *testing.T, scenario func(t *testing.T, b backend)) {
	for _, b := range []backend{
		{name: "embedded", full: true},
		{name: "firestore", open: func(t *testing.T) store.Backend { return emulators.Get(t).NewDB(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { scenario(t, b) })
	}
}

func newEnv(t *testing.T, b backend, o envOptions) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{t: t, clock: stripesim.NewManualClock(start), dataDir: t.TempDir(), logs: &lockedBuffer{}}
	e.stripeSecret = o.stripeSecret
	if e.stripeSecret == "" {
		e.stripeSecret = "sk_test_" + randomHex(16)
	}
	e.signing = o.signing
	if e.signing == nil {
		e.signing = []byte(randomHex(32))
	}
	var db store.Backend
	if b.open != nil {
		db = b.open(t)
	} else {
		edb, err := embedded.Open(ctx, filepath.Join(e.dataDir, "billrun.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { edb.Close() })
		db = edb
	}
	e.store = db

	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	simCfg := stripesim.Config{Clock: e.clock, Faults: o.faults, Seed: 7, Logger: logger, APIKey: e.stripeSecret}
	if o.simDataDir {
		simCfg.DataDir = filepath.Join(e.dataDir, "stripesim")
	}
	var err error
	e.sim, err = stripesim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.sim.Close() })
	simSrv := httptest.NewServer(e.sim)
	t.Cleanup(simSrv.Close)
	e.simURL = simSrv.URL

	ic := o.issuer
	ic.Store, ic.SigningSecret, ic.Now = db, e.signing, e.clock.Now
	e.issuer, err = vault.NewIssuer(ic)
	if err != nil {
		t.Fatal(err)
	}
	var transport http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if o.upstream != nil {
		transport = o.upstream(transport)
	}
	// Each instance has its own in-memory queue, like separate function
	// instances: between them, only the store's transactions keep the caps.
	for range max(o.instances, 1) {
		proxy, err := vault.NewProxy(vault.ProxyConfig{
			Store:         db,
			StripeURL:     simSrv.URL,
			StripeSecret:  vault.StaticSecret(e.stripeSecret),
			SigningSecret: e.signing,
			Now:           e.clock.Now,
			Logger:        logger,
			Client:        &http.Client{Transport: transport, Timeout: 10 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		proxySrv := httptest.NewServer(proxy)
		t.Cleanup(proxySrv.Close)
		e.proxyURLs = append(e.proxyURLs, proxySrv.URL)
	}
	e.proxyURL = e.proxyURLs[0]
	e.responses = &recorder{next: http.DefaultTransport.(*http.Transport).Clone()}
	e.http = &http.Client{Transport: e.responses, Timeout: 20 * time.Second}
	e.direct = stripe.NewClient(e.stripeSecret, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(simSrv.URL), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: quiet,
	})))
	return e
}

// client is Charge's stripe-go client for one key: pointed at a proxy instance
// (in turn), with the key's credential as its API key and no SDK retries (the
// workflow retries).
func (e *env) client(ref string) *stripe.Client {
	url := e.proxyURLs[int(e.turn.Add(1))%len(e.proxyURLs)]
	return stripe.NewClient(vault.Credential(e.signing, ref), stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(url), MaxNetworkRetries: stripe.Int64(0), HTTPClient: e.http,
		LeveledLogger: quiet,
	})))
}

// customers creates n customers in the simulator and returns their ids.
func (e *env) customers(n int) []string {
	e.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		c, err := e.direct.V1Customers.Create(e.t.Context(), &stripe.CustomerCreateParams{Email: stripe.String(fmt.Sprintf("c%d@example.com", i))})
		if err != nil {
			e.t.Fatal(err)
		}
		ids[i] = c.ID
	}
	return ids
}

// charge is what Charge does: an off-session PaymentIntent through the proxy.
func (e *env) charge(ctx context.Context, ref, customer, currency string, amount int64, idem string) (*stripe.PaymentIntent, error) {
	return e.chargeWith(ctx, ref, customer, currency, amount, idem, "pm_card_visa")
}

func (e *env) chargeWith(ctx context.Context, ref, customer, currency string, amount int64, idem, pm string) (*stripe.PaymentIntent, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String(currency), Customer: stripe.String(customer),
		PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
	}
	params.AddMetadata("period", period)
	params.SetIdempotencyKey(idem)
	// Like the workflow, retry the proxy's 503 (store contention): it reserved
	// and forwarded nothing.
	for attempt := 1; ; attempt++ {
		pi, err := e.client(ref).V1PaymentIntents.Create(ctx, params)
		if vaultCode(err) != "vault_unavailable" || attempt == maxBusyRetries {
			return pi, err
		}
		e.busy.Add(1)
		time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
	}
}

// maxBusyRetries bounds the retries of a 503 vault_unavailable.
const maxBusyRetries = 50

// vaultCode returns the vault refusal code of a stripe-go error, or "".
func vaultCode(err error) string {
	var se *stripe.Error
	if errors.As(err, &se) && vault.ErrorForCode(string(se.Code)) != nil {
		return string(se.Code)
	}
	return ""
}

// raw sends a request to the proxy as-is, for what stripe-go would not send.
func (e *env) raw(method, path, credential string, header http.Header, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.proxyURL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func chargeForm(customer, currency string, amount int64) string {
	return url.Values{
		"amount": {fmt.Sprint(amount)}, "currency": {currency}, "customer": {customer},
		"payment_method": {"pm_card_visa"}, "confirm": {"true"}, "off_session": {"true"},
	}.Encode()
}

// snapshot is every vault document of a period, without update times.
func (e *env) snapshot() map[string]store.Data {
	e.t.Helper()
	out := map[string]store.Data{}
	for _, coll := range []string{"vault_keys", "vault_runs/" + period + "/customers", "vault_runs/" + period + "/budget_shards"} {
		docs, err := e.store.Query(e.t.Context(), store.Query{Collection: coll})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, d := range docs {
			out[d.Path] = d.Data
		}
	}
	return out
}

// paid sums the simulator's ledger by customer.
func (e *env) paid() map[string]int64 {
	out := map[string]int64{}
	for _, p := range e.sim.Ledger() {
		out[p.Customer] += p.Amount
	}
	return out
}

// parallel runs fn(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
