package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
)

// TestConcurrentChargesOnePayment: 50 simultaneous Charge calls for one
// customer, spread over 5 function instances sharing the store, make exactly
// one payment; every call ends 200 after retries.
func TestConcurrentChargesOnePayment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		const instances = 5
		e := newEnv(t, b, envOptions{
			instances: instances,
			// Stripe latency keeps the first request in flight while others arrive.
			faults: stripesim.Faults{Latency: stripesim.Latency{Dist: "fixed", Min: 30 * time.Millisecond}},
		})
		e.seed(visa(1)...)
		e.issueAll("exec-1")
		const n = 50
		var wg sync.WaitGroup
		start := make(chan struct{})
		first := make([]reply, n)
		final := make([]reply, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				first[i] = e.chargeOn(i%instances, "c000")
				final[i], _ = e.chargeUntilSettledOn(i%instances, "c000", 100)
			}()
		}
		close(start)
		wg.Wait()
		charged, retried := 0, 0
		for i := range n {
			if first[i].status == http.StatusServiceUnavailable || first[i].status == http.StatusTooManyRequests {
				retried++
			}
			switch s := first[i].status; {
			case first[i].err != nil:
				t.Errorf("call %d: transport error %v", i, first[i].err)
			case s != http.StatusOK && s != http.StatusServiceUnavailable && s != http.StatusTooManyRequests:
				t.Errorf("call %d: %d %v", i, s, first[i].body)
			}
			wantStatus(t, final[i], http.StatusOK, "")
			if first[i].str("outcome") == "charged" {
				charged++
			}
		}
		if got := len(e.assertLedgerOnce()); got != 1 {
			t.Fatalf("%d payments, want 1", got)
		}
		if charged > 1 {
			t.Errorf("%d calls answered charged; at most one settles the record", charged)
		}
		t.Logf("first answers: %d charged, %d told to retry, the rest already_charged; %d Stripe requests", charged, retried, len(e.stripePosts()))
		rec := e.record("c000")
		if posts := len(e.stripePosts()); rec.State != billing.StateSucceeded || int(rec.Attempts) != posts {
			t.Errorf("record %s with %d attempts; Stripe saw %d requests", rec.State, rec.Attempts, posts)
		}
	})
}

// TestBadInputs: malformed requests are refused with a clear 4xx and change
// nothing; customer data at fault is a recorded terminal outcome; no payment
// either way.
func TestBadInputs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(
			cust{id: "neg", pm: "pm_card_visa", amount: -500},
			cust{id: "zero", pm: "pm_card_visa", amount: 0},
			cust{id: "nopm", amount: 1500},
			cust{id: "nostripe", pm: "pm_card_visa", amount: 1500, noStripe: true},
			cust{id: "badcur", pm: "pm_card_visa", amount: 1500, currency: "dollars"},
		)
		huge := `{"period":"2026-10","customer_id":"` + strings.Repeat("x", 70<<10) + `"}`
		requests := []struct {
			name    string
			fn      string
			body    string
			status  int
			message string // a fragment of the error
		}{
			{"malformed JSON", "Charge", `{"period": "2026-10", "customer_id": `, 400, "malformed JSON"},
			{"not an object", "Charge", `["2026-10"]`, 400, "malformed JSON"},
			{"empty body", "Preflight", ``, 400, "empty"},
			{"trailing data", "Charge", `{"period":"2026-10","customer_id":"zero"} {}`, 400, "after the JSON object"},
			{"amount supplied by the caller", "Charge", `{"period":"2026-10","customer_id":"zero","amount":-5}`, 400, `unknown field "amount"`},
			{"malformed period", "Charge", `{"period":"10-2026","customer_id":"zero"}`, 400, "want YYYY-MM"},
			{"month 13", "Preflight", `{"period":"2026-13","execution_id":"x"}`, 400, "month must be 01 to 12"},
			{"period before billrun", "Preflight", `{"period":"1999-12","execution_id":"x"}`, 400, "unknown period"},
			{"period far ahead", "Preflight", `{"period":"2031-01","execution_id":"x"}`, 400, "unknown period"},
			{"missing execution id", "Preflight", `{"period":"2026-10"}`, 400, "execution_id"},
			{"customer id with a slash", "Charge", `{"period":"2026-10","customer_id":"a/b"}`, 400, "customer_id"},
			{"bad key ref", "Charge", `{"period":"2026-10","customer_id":"zero","key_ref":"../x"}`, 400, "key_ref"},
			{"page too big", "DueCustomers", `{"period":"2026-10","execution_id":"x","page_size":100000}`, 400, "page_size"},
			{"oversized body", "Charge", huge, 413, "larger than"},
			{"paging without a claim", "DueCustomers", `{"period":"2026-10","execution_id":"x"}`, 409, "lease_lost"},
			{"completing without a claim", "MarkCompleted", `{"period":"2026-10","execution_id":"x"}`, 409, "lease_lost"},
		}
		for _, tc := range requests {
			t.Run(tc.name, func(t *testing.T) {
				r := e.call(tc.fn, tc.body)
				if r.err != nil || r.status != tc.status || !strings.Contains(r.str("error"), tc.message) {
					t.Errorf("%s: %d %v, want %d with %q", tc.fn, r.status, r.body, tc.status, tc.message)
				}
			})
		}
		t.Run("GET", func(t *testing.T) {
			resp, err := e.http.Get(e.urls[0] + "/Charge")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
				t.Errorf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
			}
		})
		if recs, err := billing.ListCharges(t.Context(), b, period); err != nil || len(recs) != 0 {
			t.Fatalf("refused requests left %d records (%v)", len(recs), err)
		}

		customers := []struct {
			id, outcome, code string
			status            int
			recorded          bool
		}{
			{"neg", "failed", "invalid_amount", 422, true},
			{"zero", "skipped", "", 200, true},
			{"nopm", "failed", "no_payment_method", 422, true},
			{"nostripe", "failed", "no_stripe_customer", 422, true},
			{"badcur", "failed", "invalid_currency", 422, true},
			{"ghost", "failed", "unknown_customer", 422, false},
		}
		for _, tc := range customers {
			t.Run(tc.id, func(t *testing.T) {
				r := e.charge(tc.id)
				wantStatus(t, r, tc.status, tc.outcome)
				if tc.status == 422 && (r.str("error_code") != tc.code || r.str("reason") == "" || r.str("customer_id") != tc.id) {
					t.Errorf("422 body %v, want code %s, a reason and the customer", r.body, tc.code)
				}
				_, err := billing.GetCharge(t.Context(), b, period, tc.id)
				if recorded := err == nil; recorded != tc.recorded {
					t.Errorf("recorded = %v, want %v (%v)", recorded, tc.recorded, err)
				}
			})
		}
		if n := len(e.stripePosts()); n != 0 {
			t.Errorf("%d payment requests reached Stripe, want 0", n)
		}
		if n := len(e.sim.Ledger()); n != 0 {
			t.Errorf("%d payments, want 0", n)
		}
		// A full run over the same customers completes with them all recorded.
		res := e.runWorkflow("exec-1", 2, 1)
		e.assertSummary(res.summary, 5, map[string]int64{"failed": 4, "skipped": 1})
		e.assertAllTerminal()
	})
}
