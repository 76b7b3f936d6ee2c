package billing

import (
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store"
)

func TestIdempotencyKey(t *testing.T) {
	base := IdempotencyKey(PurposeCharge, "2026-10", "c1", 1000, "usd", 0)
	if base != IdempotencyKey(PurposeCharge, "2026-10", "c1", 1000, "usd", 0) {
		t.Fatal("key is not stable")
	}
	if len(base) > 255 || !strings.HasPrefix(base, "billrun-charge-2026-10-") {
		t.Errorf("key %q (%d chars)", base, len(base))
	}
	// Generation 0 is the derivation pending records were written with before
	// keys could rotate: it must not change under them.
	if want := "billrun-charge-2026-10-5d2e4599fbe6a15459545dd58c055e88f66bbf9cca95571d6f67dacd5fd075f0"; base != want {
		t.Errorf("generation 0 key %q, want %q", base, want)
	}
	others := map[string]string{
		"purpose":  IdempotencyKey("refund", "2026-10", "c1", 1000, "usd", 0),
		"period":   IdempotencyKey(PurposeCharge, "2026-11", "c1", 1000, "usd", 0),
		"customer": IdempotencyKey(PurposeCharge, "2026-10", "c2", 1000, "usd", 0),
		"amount":   IdempotencyKey(PurposeCharge, "2026-10", "c1", 1001, "usd", 0),
		"currency": IdempotencyKey(PurposeCharge, "2026-10", "c1", 1000, "eur", 0),
		// Shifting characters between fields must not collide.
		"boundary": IdempotencyKey(PurposeCharge, "2026-10", "c11", 000, "usd", 0),
		// A rotated key (Charge, after a replayed 500) is a new key.
		"generation": IdempotencyKey(PurposeCharge, "2026-10", "c1", 1000, "usd", 1),
	}
	for name, k := range others {
		if k == base {
			t.Errorf("changing %s keeps the key", name)
		}
	}
	long := IdempotencyKey(PurposeCharge, "2026-10", strings.Repeat("x", 128), 99_999_999, "usd", 99)
	if len(long) > 255 {
		t.Errorf("key for a 128-char customer id is %d chars", len(long))
	}
}

func TestValidatePeriod(t *testing.T) {
	now := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		period string
		ok     bool
	}{
		{"2026-10", true}, {"2026-11", true}, {"2026-12", true}, {"2000-01", true},
		{"2027-01", false}, {"1999-12", false}, {"2026-13", false}, {"2026-00", false},
		{"2026-1", false}, {"10-2026", false}, {"2026/10", false}, {"", false}, {"2026-10 ", false},
	}
	for _, tc := range tests {
		if err := ValidatePeriod(tc.period, now); (err == nil) != tc.ok {
			t.Errorf("ValidatePeriod(%q) = %v, want ok %v", tc.period, err, tc.ok)
		}
	}
}

func TestDecide(t *testing.T) {
	good := Customer{ID: "c1", StripeCustomerID: "cus_1", PaymentMethod: "pm_1", Currency: "USD", AmountSource: SourcePlan, PlanAmount: 1500, Active: true}
	with := func(f func(c *Customer)) Customer {
		c := good
		f(&c)
		return c
	}
	tests := []struct {
		name   string
		c      Customer
		state  State
		amount int64
		code   string
	}{
		{"plan", good, StatePending, 1500, ""},
		{"usage", with(func(c *Customer) {
			c.AmountSource = SourceUsage
			c.Usage = map[string][]UsageLine{"2026-10": {{"api calls", 1000, 2}, {"seats", 3, 500}}, "2026-09": {{"old", 1, 99999}}}
		}), StatePending, 3500, ""},
		{"usage with no lines", with(func(c *Customer) { c.AmountSource = SourceUsage }), StateSkipped, 0, "zero_amount"},
		{"inactive", with(func(c *Customer) { c.Active = false }), StateSkipped, 0, "inactive"},
		{"zero", with(func(c *Customer) { c.PlanAmount = 0 }), StateSkipped, 0, "zero_amount"},
		{"negative", with(func(c *Customer) { c.PlanAmount = -1 }), StateFailed, 0, "invalid_amount"},
		{"negative usage", with(func(c *Customer) {
			c.AmountSource = SourceUsage
			c.Usage = map[string][]UsageLine{"2026-10": {{"refund", -1, 500}}}
		}), StateFailed, 0, "invalid_usage"},
		{"overflow", with(func(c *Customer) {
			c.AmountSource = SourceUsage
			c.Usage = map[string][]UsageLine{"2026-10": {{"a", 1 << 62, 4}}}
		}), StateFailed, 0, "amount_overflow"},
		{"unknown source", with(func(c *Customer) { c.AmountSource = "vibes" }), StateFailed, 0, "invalid_amount_source"},
		{"bad currency", with(func(c *Customer) { c.Currency = "us$" }), StateFailed, 0, "invalid_currency"},
		{"no payment method", with(func(c *Customer) { c.PaymentMethod = "" }), StateFailed, 0, "no_payment_method"},
		{"no stripe customer", with(func(c *Customer) { c.StripeCustomerID = "" }), StateFailed, 0, "no_stripe_customer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.c.Decide("2026-10")
			if d.State != tc.state || d.Amount != tc.amount || d.ErrorCode != tc.code {
				t.Errorf("got %+v", d)
			}
			if d.State == StatePending && d.Currency != "usd" {
				t.Errorf("currency %q not normalised", d.Currency)
			}
		})
	}
}

func TestCustomerRoundTrip(t *testing.T) {
	c := Customer{ID: "c1", StripeCustomerID: "cus_1", PaymentMethod: "pm_1", Currency: "eur", AmountSource: SourceUsage,
		Usage: map[string][]UsageLine{"2026-10": {{"seats", 3, 500}}}, Ceiling: 9000, Active: true}
	got, err := customerFrom(docOf("customers/c1", c.Data()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Decide("2026-10") != c.Decide("2026-10") || got.Ceiling != 9000 {
		t.Errorf("round trip: %+v", got)
	}
	bad := c.Data()
	bad["plan_amount"] = "lots"
	if c, d := decideDoc(docOf("customers/c1", bad), "2026-10"); c.ID != "c1" || d.State != StateFailed || d.ErrorCode != "invalid_customer_data" {
		t.Errorf("undecodable customer: %+v %+v", c, d)
	}
}

func docOf(path string, d store.Data) store.Doc { return store.Doc{Path: path, Data: d} }
