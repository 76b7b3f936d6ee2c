package api_test

import (
	"net/http"
	"testing"

	"billrun.dev/billrun/internal/store"
)

// TestFullRun bills a mixed period end to end: paying, declined, needing
// authentication, inactive, zero, broken customers; then a re-run of the
// completed period makes zero Stripe calls.
func TestFullRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(append(visa(9),
			cust{id: "d1", pm: "pm_card_visa_chargeDeclinedInsufficientFunds", amount: 500},
			cust{id: "d2", pm: "pm_card_chargeCustomerFail", amount: 700},
			cust{id: "r1", pm: "pm_card_authenticationRequired", amount: 900},
			cust{id: "s1", pm: "pm_card_visa", amount: 800, inactive: true},
			cust{id: "s2", pm: "pm_card_visa", amount: 0},
			cust{id: "f1", amount: 600},
			cust{id: "f2", pm: "pm_card_visa", amount: 10, currency: "eur"},
		)...)
		res := e.runWorkflow("exec-1", 4, 3)
		if res.preflight != "claimed" {
			t.Fatalf("preflight = %s", res.preflight)
		}
		e.assertSummary(res.summary, 16, map[string]int64{
			"succeeded": 9, "declined": 2, "requires_action": 1, "skipped": 2, "failed": 2,
		})
		recs := e.assertAllTerminal()
		if got := recs["f2"].ErrorCode; got != "amount_too_small" {
			t.Errorf("f2 error code = %q, want Stripe's amount_too_small", got)
		}
		if got := recs["d1"].DeclineCode; got != "insufficient_funds" {
			t.Errorf("d1 decline code = %q", got)
		}
		totals, _ := res.summary.body["totals"].(map[string]any)
		var want int64
		for i := range 9 {
			want += 1000 + int64(i)
		}
		if got := int64(totals["usd"].(float64)); got != want {
			t.Errorf("usd total = %d, want %d", got, want)
		}

		// Re-run: a new execution, and every Charge again: no Stripe call.
		before := len(e.sim.Requests())
		if pf := e.preflight("exec-2"); pf.str("status") != "already_billed" {
			t.Fatalf("re-run preflight = %v", pf.body)
		}
		for id := range recs {
			r := e.charge(id)
			// Customers settled at enumeration (skipped, failed) never had a key.
			noKey := e.keyRef(period, id) == "" && r.status == http.StatusBadRequest
			if r.status != http.StatusOK && r.status != http.StatusUnprocessableEntity && !noKey {
				t.Errorf("re-charge %s: %d %v", id, r.status, r.body)
			}
			if r.str("outcome") == "charged" {
				t.Errorf("re-charge %s: charged again", id)
			}
		}
		if after := len(e.sim.Requests()); after != before {
			t.Errorf("re-run made %d Stripe requests, want 0", after-before)
		}
		again := e.call("MarkCompleted", map[string]any{"period": period, "execution_id": "exec-1"})
		e.assertSummary(again, 16, map[string]int64{
			"succeeded": 9, "declined": 2, "requires_action": 1, "skipped": 2, "failed": 2,
		})
	})
}
