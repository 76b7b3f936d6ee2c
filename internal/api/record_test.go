package api_test

import (
	"net/http"
	"strings"
	"testing"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
)

// TestAmountFixedByWriteAheadRecord: the amount is fixed when the page writes
// the record (and the key is issued for it); a later change of the customer's
// data changes nothing for this period. No charge happens before its page.
func TestAmountFixedByWriteAheadRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(3)...)
		// Before any page there is no key, and no charge.
		early := e.charge("c000")
		if early.status != http.StatusBadRequest || !strings.Contains(early.str("error"), "key_ref") {
			t.Fatalf("charge before its page: %d %v, want 400 (no key)", early.status, early.body)
		}
		wantStatus(t, e.preflight("exec-1"), http.StatusOK, "")
		page := e.issue(period, "exec-1", "", 0)
		wantStatus(t, page, http.StatusOK, "")
		if list := page.body["customers"].([]any); len(list) != 3 {
			t.Fatalf("listed %v, want 3", list)
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
		wantStatus(t, e.charge("c000"), http.StatusOK, "charged")
		wantStatus(t, e.charge("c002"), http.StatusOK, "charged")
		sum := e.call("MarkCompleted", map[string]any{"period": period, "execution_id": "exec-1"})
		e.assertSummary(sum, 3, map[string]int64{"succeeded": 3})
		e.assertAllTerminal()
		// A customer added after completion has no key; another customer's
		// key does not open its charge.
		e.seed(cust{id: "late", pm: "pm_card_visa", amount: 999})
		late := e.postCtx(t.Context(), e.http, 0, "Charge", map[string]any{"period": period, "customer_id": "late", "key_ref": e.keyRef(period, "c000")})
		if late.status != http.StatusBadRequest || !strings.Contains(late.str("error"), "another period or customer") {
			t.Errorf("late customer: %d %v, want 400", late.status, late.body)
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
		page := e.issue(period, "exec-1", "", 2)
		wantStatus(t, page, http.StatusOK, "")
		skip := e.issue(period, "exec-1", "c003", 0)
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
		rest := e.issue(period, "exec-1", page.str("next_cursor"), 0)
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
