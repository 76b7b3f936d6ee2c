package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/faultstore"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// The scenarios bill October 2026 on 2 November.
const (
	period    = "2026-10"
	testLease = 10 * time.Minute
)

var startTime = time.Date(2026, 11, 2, 6, 0, 0, 0, time.UTC)

// backendCase opens one kind of store for a test.
type backendCase struct {
	name string
	open func(t *testing.T) store.Backend
}

// backends lists the stores every scenario runs on.
func backends() []backendCase {
	return append([]backendCase{{"embedded", func(t *testing.T) store.Backend { return openEmbedded(t) }}}, extraBackends()...)
}

func openEmbedded(t testing.TB) store.Backend {
	t.Helper()
	db, err := embedded.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatalf("open embedded store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// forEachBackend runs fn once per store.
func forEachBackend(t *testing.T, fn func(t *testing.T, b store.Backend)) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) { fn(t, bc.open(t)) })
	}
}

// env is one billing deployment over real HTTP: handlers on an httptest server,
// the vault proxy on another (at its root), the real stripe-go client, the
// Stripe simulator, one store, one manual clock.
type env struct {
	t     testing.TB
	clock *stripesim.ManualClock
	sim   *stripesim.Server
	store store.Backend
	// urls are the function instances; calls go to the first unless said.
	urls   []string
	http   *http.Client
	stripe *stripe.Client // the test's own client, seeding the simulator only
	// faults are the simulator's faults outside seeding.
	faults stripesim.Faults
	issuer *vault.Issuer
	// vaultAhead is how far the vault's clock runs ahead of the functions'
	// (envOptions.vaultAhead, in nanoseconds); a test may change it to make
	// the clocks drift apart.
	vaultAhead *atomic.Int64
	// keys holds the key references the issued pages gave, by period/customer.
	mu   sync.Mutex
	keys map[string]string
}

type envOptions struct {
	faults stripesim.Faults
	// wrap wraps the store the handlers use (fault injection).
	wrap func(store.Backend) store.Backend
	// noKeepAlive stops Go's transport from silently resending a request that
	// carries an Idempotency-Key when a reused connection dies, which would
	// hide a dropped answer from billrun (harmless: same key).
	noKeepAlive bool
	// onStripe sees every request on its way to the simulator.
	onStripe func(*http.Request)
	// instances is how many function instances (each its own handlers and
	// billing service) serve over the one store; 0 means 1.
	instances int
	// vault adjusts the issuer (default caps of 1,000,000 in usd and eur).
	vault vault.IssuerConfig
	// vaultAhead runs the vault's clock (issuer and proxy) ahead of the
	// functions' own: a key can expire between Charge's check and the proxy.
	vaultAhead time.Duration
	// logs receives the functions' and the proxy's logs; nil discards.
	logs io.Writer
}

// testStripeKey is the simulator's key, known to the proxy only.
const testStripeKey = "sk_test_billrun_proxy_only"

// testSigningSecret is the vault's signing secret in tests.
var testSigningSecret = []byte("billrun api tests' vault signing secret")

func newEnv(t testing.TB, b store.Backend, opts envOptions) *env {
	t.Helper()
	clock := stripesim.NewManualClock(startTime)
	sim, err := stripesim.New(stripesim.Config{Clock: clock, Seed: 1})
	if err != nil {
		t.Fatalf("stripesim: %v", err)
	}
	simSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.onStripe != nil {
			opts.onStripe(r)
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { simSrv.Close(); sim.Close() })
	handlerStore := b
	if opts.wrap != nil {
		handlerStore = opts.wrap(b)
	}
	newClient := func() *http.Client {
		hc := &http.Client{Timeout: 10 * time.Second}
		if opts.noKeepAlive {
			hc.Transport = &http.Transport{DisableKeepAlives: true}
		}
		return hc
	}
	log := slog.New(slog.DiscardHandler)
	if opts.logs != nil {
		log = slog.New(slog.NewJSONHandler(opts.logs, nil))
	}
	icfg := opts.vault
	vaultAhead := &atomic.Int64{}
	vaultAhead.Store(int64(opts.vaultAhead))
	vaultNow := func() time.Time { return clock.Now().Add(time.Duration(vaultAhead.Load())) }
	icfg.Store, icfg.SigningSecret, icfg.Now = handlerStore, testSigningSecret, vaultNow
	if icfg.DefaultCaps == nil {
		icfg.DefaultCaps = map[string]int64{"usd": 1_000_000, "eur": 1_000_000}
	}
	issuer, err := vault.NewIssuer(icfg)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy is its own function: it has the store without the functions'
	// fault injection, and the only copy of the Stripe key.
	proxy, err := vault.NewProxy(vault.ProxyConfig{
		Store: b, StripeURL: simSrv.URL, StripeSecret: vault.StaticSecret(testStripeKey), SigningSecret: testSigningSecret,
		Now: vaultNow, Logger: log, Client: newClient(),
	})
	if err != nil {
		t.Fatal(err)
	}
	proxySrv := httptest.NewServer(proxy)
	t.Cleanup(proxySrv.Close)
	var urls []string
	for range max(opts.instances, 1) {
		h, err := api.New(api.Deps{
			Store: handlerStore, Issuer: issuer, SigningSecret: testSigningSecret,
			ProxyURL: proxySrv.URL, ProxyClient: newClient(),
			Now: clock.Now, Lease: testLease, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h.Mux())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return &env{
		t: t, clock: clock, sim: sim, store: b, urls: urls, faults: opts.faults, issuer: issuer, vaultAhead: vaultAhead,
		http:   &http.Client{Timeout: 30 * time.Second},
		stripe: billing.NewStripeClient("sk_test_seed", simSrv.URL, &http.Client{Timeout: 10 * time.Second}),
		keys:   map[string]string{},
	}
}

// setFaults changes the simulator's faults for the rest of the scenario.
func (e *env) setFaults(f stripesim.Faults) {
	e.faults = f
	e.sim.SetFaults(f)
}

// cust describes a test customer.
type cust struct {
	id       string
	pm       string // a test payment method id; "" for none
	amount   int64
	currency string
	inactive bool
	// noStripe leaves the Stripe customer id empty.
	noStripe bool
	// ceiling is the customer's cap (0: none).
	ceiling int64
}

// seed creates the customers in the simulator and the store.
func (e *env) seed(cs ...cust) {
	e.t.Helper()
	// Seeding is set-up, not the scenario: no faults meanwhile.
	e.sim.SetFaults(stripesim.Faults{})
	defer e.sim.SetFaults(e.faults)
	var out []billing.Customer
	for _, c := range cs {
		bc := billing.Customer{
			ID: c.id, PaymentMethod: c.pm, Currency: c.currency, AmountSource: billing.SourcePlan,
			PlanAmount: c.amount, Active: !c.inactive, Ceiling: c.ceiling,
		}
		if bc.Currency == "" {
			bc.Currency = "usd"
		}
		if !c.noStripe {
			sc, err := e.stripe.V1Customers.Create(e.t.Context(), &stripe.CustomerCreateParams{Name: stripe.String(c.id)})
			if err != nil {
				e.t.Fatalf("create stripe customer: %v", err)
			}
			bc.StripeCustomerID = sc.ID
		}
		out = append(out, bc)
	}
	if err := billing.PutCustomers(e.t.Context(), e.store, out); err != nil {
		e.t.Fatal(err)
	}
}

// visa returns n paying customers c000…, each charged 1000+i cents.
func visa(n int) []cust {
	cs := make([]cust, n)
	for i := range cs {
		cs[i] = cust{id: fmt.Sprintf("c%03d", i), pm: "pm_card_visa", amount: 1000 + int64(i)}
	}
	return cs
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	err    error // transport error (timeout, dropped connection)
}

func (r reply) str(k string) string {
	s, _ := r.body[k].(string)
	return s
}

func (r reply) num(k string) int64 {
	f, _ := r.body[k].(float64)
	return int64(f)
}

// post sends a JSON body to one function.
func (e *env) post(client *http.Client, fn string, body any) reply {
	return e.postCtx(context.Background(), client, 0, fn, body)
}

// postCtx is post to one instance, with a context the caller may cancel (a
// caller giving up).
func (e *env) postCtx(ctx context.Context, client *http.Client, instance int, fn string, body any) reply {
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[instance]+"/"+fn, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{err: err}
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &r.body); err != nil {
			e.t.Fatalf("%s: answer %d is not JSON: %q", fn, resp.StatusCode, data)
		}
	}
	return r
}

func (e *env) call(fn string, body any) reply { return e.post(e.http, fn, body) }

func (e *env) preflight(exec string) reply {
	return e.call(api.NamePreflight, map[string]any{"period": period, "execution_id": exec})
}

func (e *env) charge(customer string) reply { return e.chargeOn(0, customer) }

func (e *env) chargeOn(instance int, customer string) reply {
	return e.chargeFor(period, instance, customer)
}

// chargeFor charges a customer of period p with the key its page gave.
func (e *env) chargeFor(p string, instance int, customer string) reply {
	return e.postCtx(context.Background(), e.http, instance, api.NameCharge,
		map[string]any{"period": p, "customer_id": customer, "key_ref": e.keyRef(p, customer)})
}

// chargeAs charges a customer of period as the workflow does, on behalf of
// the execution that owns the run's lease.
func (e *env) chargeAs(execution, customer string) reply {
	return e.postCtx(context.Background(), e.http, 0, api.NameCharge,
		map[string]any{"period": period, "customer_id": customer, "key_ref": e.keyRef(period, customer), "execution_id": execution})
}

// keyRef is the key reference the last page gave the customer ("" if none).
func (e *env) keyRef(p, customer string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.keys[p+"/"+customer]
}

// issue asks IssueVaultKeys for one page of period p, retrying 429/503 like
// any workflow step, and remembers the key references it gave.
func (e *env) issue(p, exec, cursor string, pageSize int) reply {
	e.t.Helper()
	var page reply
	for range 20 {
		page = e.call(api.NameIssueVaultKeys, map[string]any{"period": p, "execution_id": exec, "cursor": cursor, "page_size": pageSize})
		if page.err != nil || page.status != http.StatusServiceUnavailable && page.status != http.StatusTooManyRequests {
			break
		}
		e.waitRetryAfter(page)
	}
	list, _ := page.body["customers"].([]any)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range list {
		m := c.(map[string]any)
		e.keys[p+"/"+m["customer_id"].(string)] = m["key_ref"].(string)
	}
	return page
}

// issueAll claims the period for exec and issues every page.
func (e *env) issueAll(exec string) {
	e.t.Helper()
	if pf := e.preflight(exec); pf.status != http.StatusOK {
		e.t.Fatalf("preflight: %d %v", pf.status, pf.body)
	}
	for cursor := ""; ; {
		page := e.issue(period, exec, cursor, 100)
		if page.status != http.StatusOK {
			e.t.Fatalf("issue vault keys: %d %v %v", page.status, page.body, page.err)
		}
		if page.body["done"] == true {
			return
		}
		cursor = page.str("next_cursor")
	}
}

// chargeUntilSettled retries a charge the way the workflow does: on 429/503 and
// transport errors, after Retry-After on the manual clock (never a real sleep),
// at most maxTries times.
func (e *env) chargeUntilSettled(customer string, maxTries int) (reply, int) {
	return e.chargeUntilSettledOn(0, customer, maxTries)
}

func (e *env) chargeUntilSettledOn(instance int, customer string, maxTries int) (reply, int) {
	return e.chargeUntilSettledFor(period, instance, customer, maxTries)
}

func (e *env) chargeUntilSettledFor(p string, instance int, customer string, maxTries int) (reply, int) {
	var r reply
	for try := 1; try <= maxTries; try++ {
		r = e.chargeFor(p, instance, customer)
		if r.err == nil && r.status != http.StatusServiceUnavailable && r.status != http.StatusTooManyRequests {
			return r, try
		}
		if r.err == nil {
			e.waitRetryAfter(r)
		}
	}
	return r, maxTries
}

// waitRetryAfter honours Retry-After by moving the manual clock.
func (e *env) waitRetryAfter(r reply) {
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 {
		e.t.Fatalf("retryable answer %d without a valid Retry-After: %q", r.status, r.header.Get("Retry-After"))
	}
	e.clock.Advance(time.Duration(secs) * time.Second)
}

// runResult is what one execution of the (test) workflow did.
type runResult struct {
	preflight string
	outcomes  map[string]string // customer → final outcome
	summary   reply
	charges   int // Charge calls made
	held      int // customers held for review by issuance
	// replies are every answer the functions gave (for the secret scan).
	replies []reply
}

// runWorkflow plays workflows/billing.yaml's shape over HTTP: preflight, then
// page by page, issue vault keys and charge each due customer with its key
// (workers in parallel, retrying transient answers), then mark completed.
func (e *env) runWorkflow(exec string, pageSize, workers int) runResult {
	return e.runWorkflowFor(period, exec, pageSize, workers)
}

func (e *env) runWorkflowFor(p, exec string, pageSize, workers int) runResult {
	e.t.Helper()
	res := runResult{outcomes: map[string]string{}}
	pf := e.call(api.NamePreflight, map[string]any{"period": p, "execution_id": exec})
	if pf.err != nil || pf.status != http.StatusOK {
		e.t.Fatalf("preflight: %d %v %v", pf.status, pf.body, pf.err)
	}
	res.replies = append(res.replies, pf)
	res.preflight = pf.str("status")
	if res.preflight != "claimed" && res.preflight != "resumed" {
		return res
	}
	var mu sync.Mutex
	cursor := ""
	for {
		page := e.issue(p, exec, cursor, pageSize)
		if page.err != nil || page.status != http.StatusOK {
			e.t.Fatalf("issue vault keys: %d %v %v", page.status, page.body, page.err)
		}
		res.replies = append(res.replies, page)
		res.held += int(page.num("held"))
		list, _ := page.body["customers"].([]any)
		jobs := make(chan string)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range jobs {
					r, tries := e.chargeUntilSettledFor(p, 0, id, 50)
					mu.Lock()
					res.charges += tries
					res.replies = append(res.replies, r)
					if r.err != nil {
						res.outcomes[id] = "transport error: " + r.err.Error()
					} else {
						res.outcomes[id] = r.str("outcome")
					}
					mu.Unlock()
				}
			}()
		}
		for _, c := range list {
			jobs <- c.(map[string]any)["customer_id"].(string)
		}
		close(jobs)
		wg.Wait()
		if done, _ := page.body["done"].(bool); done {
			break
		}
		cursor = page.str("next_cursor")
	}
	res.summary = e.call(api.NameMarkCompleted, map[string]any{"period": p, "execution_id": exec})
	res.replies = append(res.replies, res.summary)
	return res
}

// assertLedgerOnce checks I1 against the simulator's ledger: at most one
// successful payment per (period, customer), and returns payments by customer.
func (e *env) assertLedgerOnce() map[string]stripesim.Payment {
	e.t.Helper()
	byCustomer := map[string]stripesim.Payment{}
	for _, p := range e.sim.Ledger() {
		if p.Metadata[billing.MetaPeriod] != period {
			continue
		}
		c := p.Metadata[billing.MetaCustomer]
		if prev, dup := byCustomer[c]; dup {
			e.t.Errorf("I1 violated: customer %s paid twice: %s and %s", c, prev.PaymentIntentID, p.PaymentIntentID)
		}
		byCustomer[c] = p
	}
	return byCustomer
}

// assertAllTerminal checks I2: every customer in the store has exactly one
// charge record, in a terminal state, and every succeeded record matches one
// payment in the ledger (and no payment lacks a succeeded record).
func (e *env) assertAllTerminal() map[string]billing.ChargeRecord {
	e.t.Helper()
	ctx := context.Background()
	paid := e.assertLedgerOnce()
	recs, err := billing.ListCharges(ctx, e.store, period)
	if err != nil {
		e.t.Fatal(err)
	}
	custs, err := e.store.Query(ctx, store.Query{Collection: "customers"})
	if err != nil {
		e.t.Fatal(err)
	}
	byID := map[string]billing.ChargeRecord{}
	for _, r := range recs {
		byID[r.CustomerID] = r
		if !r.State.Terminal() {
			e.t.Errorf("I2: customer %s is %s (%s)", r.CustomerID, r.State, r.Reason)
		}
		p, ok := paid[r.CustomerID]
		switch {
		case r.State == billing.StateSucceeded && !ok:
			e.t.Errorf("customer %s recorded succeeded without a payment", r.CustomerID)
		case r.State == billing.StateSucceeded && (p.PaymentIntentID != r.PaymentIntent || p.Amount != r.Amount):
			e.t.Errorf("customer %s: record %s/%d, ledger %s/%d", r.CustomerID, r.PaymentIntent, r.Amount, p.PaymentIntentID, p.Amount)
		case r.State != billing.StateSucceeded && ok:
			e.t.Errorf("customer %s paid (%s) but recorded %s", r.CustomerID, p.PaymentIntentID, r.State)
		}
	}
	for _, c := range custs {
		if _, ok := byID[c.ID()]; !ok {
			e.t.Errorf("I2: customer %s has no charge record", c.ID())
		}
	}
	return byID
}

// assertSummary checks a MarkCompleted answer adds up.
func (e *env) assertSummary(r reply, wantDue int64, wantCounts map[string]int64) {
	e.t.Helper()
	if r.err != nil || r.status != http.StatusOK {
		e.t.Fatalf("mark completed: %d %v %v", r.status, r.body, r.err)
	}
	if got := r.num("due"); got != wantDue {
		e.t.Errorf("summary due = %d, want %d", got, wantDue)
	}
	counts, _ := r.body["counts"].(map[string]any)
	var total int64
	for state, v := range counts {
		n := int64(v.(float64))
		total += n
		if want := wantCounts[state]; n != want {
			e.t.Errorf("summary counts[%s] = %d, want %d", state, n, want)
		}
	}
	if total != wantDue {
		e.t.Errorf("summary counts add up to %d, want due %d", total, wantDue)
	}
}

// stripePosts counts the simulator's POST /v1/payment_intents requests.
func (e *env) stripePosts() []stripesim.RequestRecord {
	var out []stripesim.RequestRecord
	for _, r := range e.sim.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/payment_intents" {
			out = append(out, r)
		}
	}
	return out
}

// record reads one charge record.
func (e *env) record(customer string) billing.ChargeRecord {
	e.t.Helper()
	r, err := billing.GetCharge(context.Background(), e.store, period, customer)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func wantStatus(t *testing.T, r reply, status int, outcome string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("transport error: %v", r.err)
	}
	if r.status != status || (outcome != "" && r.str("outcome") != outcome) {
		t.Fatalf("got %d %v, want %d %s", r.status, r.body, status, outcome)
	}
}

// crashOnFault turns a store fault injected by faultstore into a crash of the
// function: the connection drops without an answer. The transaction was rolled
// back before the panic, as a real crash would leave it.
type crashOnFault struct{ *faultstore.Store }

func (c crashOnFault) RunTransaction(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	err := c.Store.RunTransaction(ctx, fn)
	if errors.Is(err, faultstore.ErrInjected) {
		panic(http.ErrAbortHandler)
	}
	return err
}

// withFaults returns an envOptions.wrap injecting a faultstore plan, and a
// function counting the faults injected so far.
func withFaults(t *testing.T, spec string, crash bool) (wrap func(store.Backend) store.Backend, injected func() int) {
	plan, err := faultstore.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	var fs *faultstore.Store
	wrap = func(b store.Backend) store.Backend {
		fs = faultstore.New(b, plan)
		if crash {
			return crashOnFault{fs}
		}
		return fs
	}
	return wrap, func() int { return len(fs.Injected()) }
}

// sortedOutcomes renders outcomes for messages.
func sortedOutcomes(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
