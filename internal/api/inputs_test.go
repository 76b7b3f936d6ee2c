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

// TestBadInputs: malformed requests (forged, truncated, missing or another
// customer's key included) are refused with a clear 4xx and change nothing;
// customer data at fault is a terminal outcome recorded by the page; no
// payment either way.
func TestBadInputs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(
			cust{id: "neg", pm: "pm_card_visa", amount: -500},
			cust{id: "zero", pm: "pm_card_visa", amount: 0},
			cust{id: "nopm", amount: 1500},
			cust{id: "nostripe", pm: "pm_card_visa", amount: 1500, noStripe: true},
			cust{id: "badcur", pm: "pm_card_visa", amount: 1500, currency: "dollars"},
			cust{id: "paid", pm: "pm_card_visa", amount: 1500},
		)
		forged := "vk_" + strings.Repeat("ab", 16)
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
			{"no key ref", "Charge", `{"period":"2026-10","customer_id":"paid"}`, 400, "key_ref: required"},
			{"bad key ref", "Charge", `{"period":"2026-10","customer_id":"zero","key_ref":"../x"}`, 400, "key_ref: malformed"},
			{"truncated key ref", "Charge", `{"period":"2026-10","customer_id":"paid","key_ref":"` + forged[:20] + `"}`, 400, "key_ref: malformed"},
			{"forged key ref", "Charge", `{"period":"2026-10","customer_id":"paid","key_ref":"` + forged + `"}`, 400, "names no vault key"},
			{"bad execution id", "Charge", `{"period":"2026-10","customer_id":"paid","key_ref":"` + forged + `","execution_id":"a/b"}`, 400, "execution_id"},
			{"page too big", "IssueVaultKeys", `{"period":"2026-10","execution_id":"x","page_size":151}`, 400, "page_size"},
			{"oversized body", "Charge", huge, 413, "larger than"},
			{"paging without a claim", "IssueVaultKeys", `{"period":"2026-10","execution_id":"x"}`, 409, "lease_lost"},
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

		if n := len(e.stripePosts()); n != 0 {
			t.Errorf("%d payment requests reached Stripe, want 0", n)
		}
		// A run records the customers whose data is at fault when their page
		// is issued; they get no key and are never sent.
		res := e.runWorkflow("exec-1", 2, 1)
		e.assertSummary(res.summary, 6, map[string]int64{"failed": 4, "skipped": 1, "succeeded": 1})
		recs := e.assertAllTerminal()
		for id, code := range map[string]string{
			"neg": "invalid_amount", "zero": "zero_amount", "nopm": "no_payment_method", "nostripe": "no_stripe_customer", "badcur": "invalid_currency",
		} {
			if recs[id].ErrorCode != code || recs[id].Reason == "" || recs[id].Attempts != 0 || e.keyRef(period, id) != "" {
				t.Errorf("%s: %+v, want %s with a reason, no attempt and no key", id, recs[id], code)
			}
		}
		// Another customer's key opens nothing (a settled customer is answered
		// from its record, key or not).
		for _, id := range []string{"ghost"} {
			r := e.postCtx(t.Context(), e.http, 0, "Charge", map[string]any{"period": period, "customer_id": id, "key_ref": e.keyRef(period, "paid")})
			if r.status != http.StatusBadRequest || !strings.Contains(r.str("error"), "another period or customer") {
				t.Errorf("%s with another customer's key: %d %v, want 400", id, r.status, r.body)
			}
		}
		if n := len(e.sim.Ledger()); n != 1 {
			t.Errorf("%d payments, want 1", n)
		}
		e.assertAllTerminal()
	})
}
