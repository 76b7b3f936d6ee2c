package stripesim

import (
	"testing"
	"time"
)

func TestDuplicates(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 10, 1, 0, min, 0, 0, time.UTC) }
	pay := func(id, period, cust string, min int) Payment {
		return Payment{PaymentIntentID: id, Metadata: map[string]string{"period": period, "customer": cust}, Created: at(min)}
	}
	ledger := []Payment{
		pay("pi_1", "2026-10", "c1", 0),
		pay("pi_2", "2026-10", "c2", 1),
		pay("pi_3", "2026-11", "c1", 2),           // another period: fine
		pay("pi_4", "2026-10", "c1", 3),           // the double charge
		{PaymentIntentID: "pi_5", Created: at(4)}, // not billrun's: ignored
	}
	byPeriodCustomer := func(p Payment) string {
		if p.Metadata["period"] == "" {
			return ""
		}
		return p.Metadata["period"] + "/" + p.Metadata["customer"]
	}
	got := Duplicates(ledger, byPeriodCustomer)
	if len(got) != 1 || len(got["2026-10/c1"]) != 2 || got["2026-10/c1"][0].PaymentIntentID != "pi_1" || got["2026-10/c1"][1].PaymentIntentID != "pi_4" {
		t.Fatalf("got %+v", got)
	}
	if d := Duplicates(ledger[:3], byPeriodCustomer); len(d) != 0 {
		t.Fatalf("no duplicates expected, got %+v", d)
	}
}
