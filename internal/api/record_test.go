package api_test

import (
	"net/http"
	"strings"
	"testing"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
)

// TestAmountFixedByWriteAheadRecord: the amount is fixed when the record is
// written, by enumeration or by a first Charge; a later change of the
// customer's data changes nothing for this period.
func TestAmountFixedByWriteAheadRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(3)...)
		// c000 is charged before any run exists: its record is made then.
		early := e.charge("c000")
		wantStatus(t, early, http.StatusOK, "charged")
		if early.num("amount") != 1000 {
			t.Fatalf("amount %d", early.num("amount"))
		}
		wantStatus(t, e.preflight("exec-1"), http.StatusOK, "")
		page := e.call("DueCustomers", map[string]any{"period": period, "execution_id": "exec-1"})
		wantStatus(t, page, http.StatusOK, "")
		if list := page.body["customers"].([]any); len(list) != 2 {
			t.Fatalf("listed %v, want c001 and c002 (c000 is settled)", list)
		}
		// The data changes after enumeration (a tenfold bug, a plan change).
		c, err := billing.GetCustomer(t.Context(), b, "c001")
		if err != nil {
			t.Fatal(err)
		}
		c.PlanAmount *= 10
		if err := billing.PutCustomers(t.Context(), b, []billing.Customer{c}); err != nil {
			t.Fatal(err)
		}
		r := e.charge("c001")
		wantStatus(t, r, http.StatusOK, "charged")
		if r.num("amount") != 1001 {
			t.Errorf("charged %d, want the enumerated 1001", r.num("amount"))
		}
		wantStatus(t, e.charge("c002"), http.StatusOK, "charged")
		sum := e.call("MarkCompleted", map[string]any{"period": period, "execution_id": "exec-1"})
		e.assertSummary(sum, 3, map[string]int64{"succeeded": 3})
		e.assertAllTerminal()
		// A customer added after completion cannot be charged into the period.
		e.seed(cust{id: "late", pm: "pm_card_visa", amount: 999})
		late := e.charge("late")
		if late.status != http.StatusConflict || late.str("error") != "run_completed" {
			t.Errorf("late customer: %d %v, want 409 run_completed", late.status, late.body)
		}
		if n := len(e.assertLedgerOnce()); n != 3 {
			t.Errorf("%d payments, want 3", n)
		}
	})
}

// TestCursorSkippingAheadDoesNotFinishEnumeration: a page that starts past
// the customers enumerated so far neither counts nor completes enumeration, so
// the run cannot be completed with customers never seen.
func TestCursorSkippingAheadDoesNotFinishEnumeration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(6)...)
		wantStatus(t, e.preflight("exec-1"), http.StatusOK, "")
		page := e.call("DueCustomers", map[string]any{"period": period, "execution_id": "exec-1", "page_size": 2})
		wantStatus(t, page, http.StatusOK, "")
		skip := e.call("DueCustomers", map[string]any{"period": period, "execution_id": "exec-1", "cursor": "c003"})
		wantStatus(t, skip, http.StatusOK, "")
		if skip.body["done"] != true || skip.num("due_count") != 2 {
			t.Fatalf("skipping page: %v, want the last page with due_count still 2", skip.body)
		}
		for _, id := range []string{"c000", "c001", "c004", "c005"} {
			wantStatus(t, e.charge(id), http.StatusOK, "charged")
		}
		done := e.call("MarkCompleted", map[string]any{"period": period, "execution_id": "exec-1"})
		if done.status != http.StatusConflict || !strings.Contains(done.str("error"), "enumeration") {
			t.Fatalf("mark completed: %d %v, want 409 (enumeration not finished)", done.status, done.body)
		}
		// Paging on from the last real cursor finishes the job.
		rest := e.call("DueCustomers", map[string]any{"period": period, "execution_id": "exec-1", "cursor": page.str("next_cursor")})
		if rest.body["done"] != true || rest.num("due_count") != 6 {
			t.Fatalf("resumed paging: %v", rest.body)
		}
		for _, id := range []string{"c002", "c003"} {
			wantStatus(t, e.charge(id), http.StatusOK, "charged")
		}
		e.assertSummary(e.call("MarkCompleted", map[string]any{"period": period, "execution_id": "exec-1"}), 6, map[string]int64{"succeeded": 6})
		e.assertAllTerminal()
	})
}
