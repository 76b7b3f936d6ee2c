package progress

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/stripesim"
)

func pay(id, customer, period string) stripesim.Payment {
	return stripesim.Payment{PaymentIntentID: id, Amount: 100, Currency: "usd",
		Metadata: map[string]string{billing.MetaPeriod: period, billing.MetaCustomer: customer}}
}

func rec(customer string, state billing.State, pi string) billing.ChargeRecord {
	return billing.ChargeRecord{CustomerID: customer, State: state, PaymentIntent: pi, Attempts: 1}
}

func TestCheck(t *testing.T) {
	const p = "2026-10"
	tests := []struct {
		name     string
		records  []billing.ChargeRecord
		payments []stripesim.Payment
		want     []string // kind/customer
	}{
		{name: "clean",
			records:  []billing.ChargeRecord{rec("a", billing.StateSucceeded, "pi_a"), rec("b", billing.StateDeclined, "")},
			payments: []stripesim.Payment{pay("pi_a", "a", p), pay("pi_old", "a", "2026-09")}},
		{name: "duplicate payment",
			records:  []billing.ChargeRecord{rec("a", billing.StateSucceeded, "pi_1")},
			payments: []stripesim.Payment{pay("pi_1", "a", p), pay("pi_2", "a", p)},
			want:     []string{"duplicate_payment/a"}},
		{name: "unsettled customer",
			records: []billing.ChargeRecord{rec("a", billing.StatePending, "")},
			want:    []string{"unsettled/a"}},
		{name: "payment without a record",
			payments: []stripesim.Payment{pay("pi_x", "ghost", p)},
			want:     []string{"payment_without_record/ghost"}},
		{name: "declined customer was paid",
			records:  []billing.ChargeRecord{rec("a", billing.StateDeclined, "")},
			payments: []stripesim.Payment{pay("pi_a", "a", p)},
			want:     []string{"payment_without_record/a"}},
		{name: "recorded payment missing",
			records: []billing.ChargeRecord{rec("a", billing.StateSucceeded, "pi_a")},
			want:    []string{"record_without_payment/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Check(p, tt.records, tt.payments)
			got := []string{}
			for _, pr := range a.Problems {
				got = append(got, pr.Kind+"/"+pr.Customer)
			}
			if tt.want == nil {
				tt.want = []string{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("problems %v, want %v (%+v)", got, tt.want, a.Problems)
			}
		})
	}
}

func TestLine(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 10, 0, time.UTC)
	s := Snapshot{Due: 100, Settled: 50, Retried: 3, Time: now, Counts: map[billing.State]int64{
		billing.StateSucceeded: 40, billing.StateDeclined: 5, billing.StateRequiresAction: 3, billing.StateHeldForReview: 2}}
	want := "[############............] 50/100  charged 40  declined 5  needs auth 3  held 2  retried 3  5/s  ETA 10s"
	if got := s.Line(now.Add(-10 * time.Second)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestReadWithoutRun(t *testing.T) {
	db, err := embedded.Open(t.Context(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := Read(t.Context(), db, "2026-10", 7)
	if err != nil || s.State != "" || s.Due != 7 || s.Records != 0 {
		t.Fatalf("snapshot %+v, %v; want no run and 7 due", s, err)
	}
}
