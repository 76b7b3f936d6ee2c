package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/sample"
)

// TestDemoTwice is the README's promise: the first demo bills, the second
// charges nothing.
func TestDemoTwice(t *testing.T) {
	dir := t.TempDir()
	const customers = 200
	demo := func() runOutcome {
		r := billrun(t, dir, "demo", "--customers", "200", "--period", period, "--json").mustSucceed(t, "demo")
		var out runOutcome
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("demo --json: %v\n%s", err, r.stdout)
		}
		return out
	}
	s := assertCompleted(t, demo(), customers)
	if s.Counts[string(billing.StateSucceeded)] == 0 || s.Counts[string(billing.StateDeclined)] == 0 || s.Counts[string(billing.StateRequiresAction)] == 0 {
		t.Errorf("the sample should pay, decline and need authentication: %v", s.Counts)
	}
	paid := len(assertOnce(t, dir))
	if int64(paid) != s.Counts[string(billing.StateSucceeded)] {
		t.Errorf("%d payments for %d successes", paid, s.Counts[string(billing.StateSucceeded)])
	}
	if out := demo(); out.Status != string(billing.AlreadyBilled) {
		t.Fatalf("second demo: status %q, want already_billed", out.Status)
	}
	if again := len(assertOnce(t, dir)); again != paid {
		t.Fatalf("the second demo made %d more payments", again-paid)
	}
	// The text view ends with the summary, and not with funcframework's
	// "Serving function" lines.
	r := billrun(t, dir, "demo", "--period", period).mustSucceed(t, "demo (text)")
	if !bytes.Contains([]byte(r.stdout), []byte("already billed")) || bytes.Contains([]byte(r.stdout), []byte("Serving function")) {
		t.Errorf("demo output:\n%s", r.stdout)
	}
}

// TestF1_StoreWriteFailsAfterCharge: the functions' store fails the write
// that records a successful charge (or commits it and loses the reply), Charge
// answers 503, the workflow retries the step: one payment per customer,
// recorded once, through billrun run --faults and the production YAML.
func TestF1_StoreWriteFailsAfterCharge(t *testing.T) {
	// c01's record is written by the page, by the attempt, then by the
	// settlement: its third write is the one after the charge.
	const settle = "runs/" + period + "/charges/c01@3"
	cases := []struct {
		name      string
		faults    string
		customers int
		// attempts is c01's Stripe attempts when checked (0: not checked).
		attempts int64
	}{
		// The settlement committed: the retried step finds the record
		// settled and answers from it without asking Stripe again.
		{"settlement reply lost", "commit_lost=" + settle, 3, 1},
		// Nothing was recorded: the retry asks Stripe again under the same
		// key, Stripe replays its stored answer, and that is recorded.
		{"settlement write fails", "commit_fail=" + settle, 3, 2},
		// Any write of any charge record, with Stripe's gateway failing too
		// (one spec for both). Seed 8 fails ten writes, four of them
		// settlements, in about 3 s; seeds that fail one record several
		// times in a row wait out the workflow's backoff for up to 30 s.
		{"random charge-record faults", "seed=8,commit_fail=charges:0.1,commit_lost=charges:0.1,gateway-503=0.1,first=1", 12, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var rows []string
			for i := 1; i <= tc.customers; i++ {
				rows = append(rows, fmt.Sprintf("c%02d,,pm_card_visa,usd,2500,5000,true", i))
			}
			importCustomers(t, dir, rows...)
			begin := time.Now()
			out, r := runPeriod(t, dir, "--faults", tc.faults, "--log-level", "warn")
			injected := strings.Count(r.stderr, "faultstore: injected fault")
			t.Logf("%d store faults injected; run took %s", injected, time.Since(begin).Round(time.Millisecond))
			if injected == 0 {
				t.Fatalf("no store fault was injected:\n%s", r.stderr)
			}
			s := assertCompleted(t, out, int64(tc.customers))
			if s.Counts[string(billing.StateSucceeded)] != int64(tc.customers) {
				t.Errorf("counts %v, want every customer succeeded", s.Counts)
			}
			records := charges(t, dir)
			payments := assertOnce(t, dir)
			if len(payments) != tc.customers {
				t.Errorf("%d payments for %d customers", len(payments), tc.customers)
			}
			for _, p := range payments {
				c := p.Metadata[billing.MetaCustomer]
				if rec := records[c]; rec.State != billing.StateSucceeded || rec.PaymentIntent != p.PaymentIntentID {
					t.Errorf("%s paid %s, recorded %s %q", c, p.PaymentIntentID, rec.State, rec.PaymentIntent)
				}
			}
			if tc.attempts == 0 {
				return
			}
			if !strings.Contains(r.stderr, "injected fault ("+tc.faults+")") {
				t.Errorf("%s did not fire:\n%s", tc.faults, r.stderr)
			}
			if got := records["c01"].Attempts; got != tc.attempts {
				t.Errorf("c01: %d Stripe attempts, want %d", got, tc.attempts)
			}
		})
	}
}

// TestFaultsBadSpecStartsNothing: a bad --faults spec is a usage error that
// names the bad item, before any stack, simulator or execution starts.
func TestFaultsBadSpecStartsNothing(t *testing.T) {
	dir := t.TempDir()
	r := billrun(t, dir, "run", "--period", period, "--faults", "commit_fail=charges:2,bogus=1")
	if r.code != 2 || !strings.Contains(r.stderr, `probability "2" is not in (0, 1]`) || !strings.Contains(r.stderr, "bogus=1: unknown fault") {
		t.Fatalf("exit %d, want 2 naming both bad items:\n%s", r.code, r.stderr)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("the data directory holds %v (%v), want nothing", entries, err)
	}
}

// TestF2_AmountsInflatedTenfold: the sample's above-ceiling customers are
// held by the vault's caps before Stripe; the others are billed.
func TestF2_AmountsInflatedTenfold(t *testing.T) {
	dir := t.TempDir()
	const customers = 200
	seedCustomers(t, dir, customers)
	out, _ := runPeriod(t, dir)
	assertCompleted(t, out, customers)
	records := charges(t, dir)
	paid := map[string]bool{}
	for _, p := range assertOnce(t, dir) {
		paid[p.Metadata[billing.MetaCustomer]] = true
	}
	held := 0
	for _, c := range sample.Generate(customers, 1) {
		if c.PlanAmount <= c.Ceiling {
			continue
		}
		held++
		if r := records[c.ID]; r.State != billing.StateHeldForReview || paid[c.ID] {
			t.Errorf("%s billed %d above its ceiling %d: record %s, paid %t", c.ID, c.PlanAmount, c.Ceiling, r.State, paid[c.ID])
		}
	}
	if held == 0 {
		t.Fatal("the sample has no customer above its ceiling")
	}
}

// TestF3_TwoExecutionsAtOnce starts two executions of one period at the same
// moment through billrun serve: one bills, the other ends saying why.
func TestF3_TwoExecutionsAtOnce(t *testing.T) {
	dir := t.TempDir()
	const customers = 200
	startServe(t, dir, nil, "--faults", "latency=10ms")
	seedCustomers(t, dir, customers)
	outs := make([]runOutcome, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() { outs[i], _ = runPeriod(t, dir) })
	}
	wg.Wait()
	completed := 0
	for _, out := range outs {
		t.Logf("execution %s: %s", out.Execution.ID, out.Status)
		switch out.Status {
		case "completed":
			completed++
			assertCompleted(t, out, customers)
		case string(billing.AlreadyRunning), string(billing.AlreadyBilled):
		default:
			t.Errorf("execution %s: status %q", out.Execution.ID, out.Status)
		}
	}
	if completed != 1 {
		t.Fatalf("%d executions completed, want 1: %+v", completed, outs)
	}
	paid := len(assertOnce(t, dir))
	// The same audit through Stripe's list API, served by the simulator.
	sim, err := serverURL(dir, "stripe_simulator")
	if err != nil {
		t.Fatal(err)
	}
	r := billrunEnv(t, dir, []string{"STRIPE_SECRET_KEY=sk_test_audit", "BILLRUN_STRIPE_API_BASE=" + sim.String()},
		"audit", "--period", period, "--stripe", "--json").mustSucceed(t, "audit --stripe")
	var audit struct{ Payments int }
	if err := json.Unmarshal([]byte(r.stdout), &audit); err != nil || audit.Payments != paid {
		t.Fatalf("audit --stripe saw %d payments (%v), the ledger holds %d", audit.Payments, err, paid)
	}
}

// TestF4_ExecutionKilledMidRun kills the process running an execution
// (SIGKILL, mid-page), then a new run takes the period over once the lease
// has expired and finishes it without charging anyone twice.
func TestF4_ExecutionKilledMidRun(t *testing.T) {
	dir := t.TempDir()
	const customers = 300
	seedCustomers(t, dir, customers)
	cmd := command(t.Context(), dir, "run", "--json", "--period", period, "--lease", "2s", "--faults", "latency=20ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	db := openStore(t, dir)
	waitFor(t, time.Minute, "charges under way", func() bool {
		records, err := billing.ListCharges(t.Context(), db, period)
		return err == nil && len(records) >= 50
	})
	// Meanwhile the other commands read the same data directory.
	var live struct {
		State   string `json:"state"`
		Records int    `json:"records"`
	}
	r := billrun(t, dir, "status", "--period", period, "--json").mustSucceed(t, "status during the run")
	if err := json.Unmarshal([]byte(r.stdout), &live); err != nil || live.State != string(billing.RunInProgress) || live.Records == 0 {
		t.Errorf("status during the run: %+v %v\n%s", live, err, r.stdout)
	}
	billrun(t, dir, "report", "--period", period, "--format", "csv").mustSucceed(t, "report during the run")
	// A second run on the directory is refused, naming the process holding it.
	if r := billrun(t, dir, "run", "--period", period); r.code != 1 || !strings.Contains(r.stderr, "billrun run (pid") {
		t.Errorf("run during a run: exit %d\n%s", r.code, r.stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	run, err := billing.GetRun(t.Context(), db, period)
	if err != nil || run.State != billing.RunInProgress {
		t.Fatalf("after the kill: run %+v, %v; want in progress", run, err)
	}
	// A run before the lease ends is refused, saying why.
	if out, r := runPeriod(t, dir, "--lease", "2s"); time.Now().Before(run.LeaseExpiresAt) && (out.Status != string(billing.AlreadyRunning) || r.code != 3) {
		t.Errorf("run during the lease: status %q exit %d, want already_running exit 3", out.Status, r.code)
	}
	waitFor(t, 30*time.Second, "the lease to expire", func() bool {
		run, err := billing.GetRun(t.Context(), db, period)
		return err == nil && time.Now().After(run.LeaseExpiresAt)
	})
	out, _ := runPeriod(t, dir, "--lease", "2s")
	assertCompleted(t, out, customers)
	if run, _ := billing.GetRun(t.Context(), db, period); len(run.Executions) < 2 {
		t.Errorf("run touched by executions %v, want the killed one and its successor", run.Executions)
	}
	assertOnce(t, dir)
}

// TestF5_BranchFailsAndFanOutRetried makes one Charge call fail loudly (a
// 400 from a proxy in front of the function), so the page's parallel for
// raises and the execution fails; the next execution redoes the whole
// fan-out, and the customers finished the first time are not charged again.
func TestF5_BranchFailsAndFanOutRetried(t *testing.T) {
	dir := t.TempDir()
	const customers = 100
	const victim = "cus_00007"
	seedCustomers(t, dir, customers)
	var failed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			CustomerID string `json:"customer_id"`
		}
		json.Unmarshal(body, &req)
		if req.CustomerID == victim && failed.CompareAndSwap(false, true) {
			http.Error(w, `{"error":"injected by TestF5"}`, http.StatusBadRequest)
			return
		}
		target, err := serverURL(dir, "functions")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	chargeVia := "BILLRUN_CHARGE_URL=" + proxy.URL + "/" + api.NameCharge

	first, r := runPeriod(t, dir, "--lease", "2s", "--env", chargeVia)
	if first.Status != "failed" || r.code != 1 {
		t.Fatalf("first execution: status %q exit %d, want failed exit 1\n%s", first.Status, r.code, r.stderr)
	}
	before := charges(t, dir)
	db := openStore(t, dir)
	waitFor(t, 30*time.Second, "the lease to expire", func() bool {
		run, err := billing.GetRun(t.Context(), db, period)
		return err == nil && time.Now().After(run.LeaseExpiresAt)
	})
	second, _ := runPeriod(t, dir, "--lease", "2s", "--env", chargeVia)
	assertCompleted(t, second, customers)
	after := charges(t, dir)
	for id, rec := range before {
		if rec.State.Terminal() && (after[id].Attempts != rec.Attempts || after[id].PaymentIntent != rec.PaymentIntent) {
			t.Errorf("%s finished in the first execution, then attempted again: %d→%d attempts", id, rec.Attempts, after[id].Attempts)
		}
	}
	if after[victim].State != billing.StateSucceeded {
		t.Errorf("%s: %s, want succeeded on the second execution", victim, after[victim].State)
	}
	assertOnce(t, dir)
}

// serverURL reads one of the URLs (functions, stripe_simulator) of the stack
// serving dataDir.
func serverURL(dataDir, key string) (*url.URL, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "server.json"))
	if err != nil {
		return nil, err
	}
	var info map[string]any
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, err
	}
	s, _ := info[key].(string)
	return url.Parse(s)
}

// TestF10_CardDeclined and TestF14_AuthenticationRequired: a permanent
// refusal is recorded, answered 422, counted, and never retried, in this run
// or the next.
func TestF10_CardDeclined(t *testing.T) {
	permanentRefusal(t, "pm_card_visa_chargeDeclined", billing.StateDeclined)
}

func TestF14_AuthenticationRequired(t *testing.T) {
	permanentRefusal(t, "pm_card_authenticationRequired", billing.StateRequiresAction)
}

func permanentRefusal(t *testing.T, paymentMethod string, want billing.State) {
	dir := t.TempDir()
	importCustomers(t, dir,
		"payer,,pm_card_visa,usd,2500,5000,true",
		"refused,,"+paymentMethod+",usd,2500,5000,true")
	out, _ := runPeriod(t, dir)
	s := assertCompleted(t, out, 2)
	if s.Counts[string(want)] != 1 || s.Counts[string(billing.StateSucceeded)] != 1 {
		t.Fatalf("counts %v, want one %s and one succeeded", s.Counts, want)
	}
	if again, _ := runPeriod(t, dir); again.Status != string(billing.AlreadyBilled) {
		t.Fatalf("second run: %q, want already_billed", again.Status)
	}
	rec := charges(t, dir)["refused"]
	if rec.State != want || rec.Attempts != 1 {
		t.Errorf("refused customer: %s after %d attempts, want %s after 1", rec.State, rec.Attempts, want)
	}
	for _, p := range assertOnce(t, dir) {
		if p.Metadata[billing.MetaCustomer] == "refused" {
			t.Errorf("refused customer has payment %s", p.PaymentIntentID)
		}
	}
}

// TestF15_RateLimitStorm: Stripe answers 429 to most requests (a low rate
// and concurrency limit); the workflow backs off and the run completes with
// one payment per paying customer.
func TestF15_RateLimitStorm(t *testing.T) {
	dir := t.TempDir()
	const customers = 150
	seedCustomers(t, dir, customers)
	out, _ := runPeriod(t, dir, "--faults", "rate=40,concurrency=4")
	s := assertCompleted(t, out, customers)
	if out.Progress.Retried == 0 {
		t.Error("no charge needed a retry: the storm did not happen")
	}
	if paid := len(assertOnce(t, dir)); int64(paid) != s.Counts[string(billing.StateSucceeded)] {
		t.Errorf("%d payments for %d successes", paid, s.Counts[string(billing.StateSucceeded)])
	}
}

// TestGcloudWorkflowsRun drives the local stack with Google's own CLI,
// pointed at billrun serve's Executions API.
func TestGcloudWorkflowsRun(t *testing.T) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		t.Skip("gcloud is not installed: cannot drive the local Executions API with it")
	}
	dir := t.TempDir()
	const customers = 50
	api := startServe(t, dir, nil).api
	seedCustomers(t, dir, customers)
	cmd := exec.CommandContext(t.Context(), gcloud, "workflows", "run", "billing", "--location", "local",
		"--data", `{"period":"`+period+`"}`, "--format", "json")
	cmd.Env = append(os.Environ(),
		"CLOUDSDK_CONFIG="+t.TempDir(),
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_WORKFLOWEXECUTIONS="+api+"/",
		"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
		"CLOUDSDK_CORE_PROJECT=billrun-local",
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("gcloud workflows run: %v\n%s", err, stderr.String())
	}
	var x struct {
		State  string `json:"state"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal(stdout, &x); err != nil {
		t.Fatalf("gcloud output: %v\n%s", err, stdout)
	}
	var summary billing.Summary
	if err := json.Unmarshal([]byte(x.Result), &summary); err != nil || x.State != "SUCCEEDED" {
		t.Fatalf("execution %s, result %q: %v", x.State, x.Result, err)
	}
	var out runOutcome
	out.Status, out.Progress.Summary = "completed", &summary
	assertCompleted(t, out, customers)
	assertOnce(t, dir)
}
