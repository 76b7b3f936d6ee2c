package progress

import (
	"fmt"
	"sort"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/stripesim"
)

// Problem is one thing an audit found wrong.
type Problem struct {
	Kind     string `json:"kind"` // duplicate_payment, unsettled, payment_without_record, record_without_payment
	Customer string `json:"customer"`
	Detail   string `json:"detail"`
}

// Audit is the cross-check of a period's charge records against the payments
// Stripe (or the simulator) holds for it.
type Audit struct {
	Period   string    `json:"period"`
	Records  int       `json:"records"`
	Payments int       `json:"payments"`
	Problems []Problem `json:"problems"`
}

// Check cross-checks records with payments (every successful payment, of any
// period: those of other periods are ignored). Payments are attributed by the
// metadata billrun puts on each PaymentIntent.
func Check(period string, records []billing.ChargeRecord, payments []stripesim.Payment) Audit {
	a := Audit{Period: period, Records: len(records), Problems: []Problem{}}
	byCustomer := map[string]billing.ChargeRecord{}
	for _, r := range records {
		byCustomer[r.CustomerID] = r
		if !r.State.Terminal() {
			a.Problems = append(a.Problems, Problem{"unsettled", r.CustomerID, fmt.Sprintf("record is %s after %d attempts", r.State, r.Attempts)})
		}
	}
	paid := map[string]bool{}
	var ours []stripesim.Payment
	for _, p := range payments {
		if p.Metadata[billing.MetaPeriod] == period {
			ours = append(ours, p)
		}
	}
	a.Payments = len(ours)
	dups := stripesim.Duplicates(ours, func(p stripesim.Payment) string { return p.Metadata[billing.MetaCustomer] })
	for customer, ps := range dups {
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.PaymentIntentID
		}
		a.Problems = append(a.Problems, Problem{"duplicate_payment", customer, fmt.Sprintf("%d successful payments: %v", len(ps), ids)})
	}
	for _, p := range ours {
		customer := p.Metadata[billing.MetaCustomer]
		paid[p.PaymentIntentID] = true
		r, ok := byCustomer[customer]
		if !ok || r.State != billing.StateSucceeded || r.PaymentIntent != p.PaymentIntentID {
			if _, dup := dups[customer]; dup && ok && r.PaymentIntent != p.PaymentIntentID {
				continue // reported as a duplicate
			}
			a.Problems = append(a.Problems, Problem{"payment_without_record", customer, fmt.Sprintf("payment %s of %d %s is not recorded as this customer's success", p.PaymentIntentID, p.Amount, p.Currency)})
		}
	}
	for _, r := range records {
		if r.State == billing.StateSucceeded && !paid[r.PaymentIntent] {
			a.Problems = append(a.Problems, Problem{"record_without_payment", r.CustomerID, fmt.Sprintf("recorded payment %q is not a successful payment for %s", r.PaymentIntent, period)})
		}
	}
	sort.Slice(a.Problems, func(i, j int) bool {
		if a.Problems[i].Customer != a.Problems[j].Customer {
			return a.Problems[i].Customer < a.Problems[j].Customer
		}
		return a.Problems[i].Kind < a.Problems[j].Kind
	})
	return a
}
