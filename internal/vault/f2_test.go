package vault_test

import (
	"errors"
	"sync"
	"testing"

	"billrun.dev/billrun/internal/vault"
)

// TestF2_InflatedAmountsStoppedByCaps runs a period of 500 customers whose caps
// come from the three sources, with a data bug that multiplies one customer in
// five's amount by ten. The inflated customers are held at issuance with the
// reason and never reach Stripe; everyone else is charged through the proxy.
// A compromised charge path that sends every key ten times its amount first is
// refused by the proxy (vault_cap_exceeded), and once a key has carried its
// charge, a new charge on it is refused too (vault_key_used). No payment in
// Stripe exceeds its cap.
func TestF2_InflatedAmountsStoppedByCaps(t *testing.T) {
	eachBackend(t, testF2_InflatedAmountsStoppedByCaps)
}

func testF2_InflatedAmountsStoppedByCaps(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{issuer: vault.IssuerConfig{DefaultCaps: map[string]int64{"usd": 5_000}}})
	ctx := t.Context()
	n, pageSize := 500, 50
	ids := e.customers(n)

	type due struct {
		req      vault.IssueRequest
		inflated bool
	}
	var dues []due
	for i, id := range ids {
		base := int64(1000 + 10*(i%50)) // what the customer really owes
		r := vault.IssueRequest{Customer: id, Currency: "usd", Amount: base}
		switch i % 3 {
		case 0:
			r.Ceiling = 2 * base
		case 1:
			r.RecentPayments = []int64{base, base - 100, base + 50}
		case 2: // no ceiling, no history: the default cap (5,000) applies
		}
		d := due{req: r}
		if i%5 == 0 {
			d.req.Amount *= 10
			d.inflated = true
		}
		dues = append(dues, d)
	}

	var issued []vault.Issued
	for p := 0; p < n; p += pageSize {
		var reqs []vault.IssueRequest
		for _, d := range dues[p : p+pageSize] {
			reqs = append(reqs, d.req)
		}
		page, err := e.issuer.IssuePage(ctx, period, reqs)
		if err != nil {
			t.Fatal(err)
		}
		issued = append(issued, page...)
	}

	var wantHeld int
	for i, is := range issued {
		if is.Held != dues[i].inflated {
			t.Errorf("%s: held = %v, inflated = %v (%+v)", is.Customer, is.Held, dues[i].inflated, is)
		}
		if is.Held {
			wantHeld++
			if is.Reason != vault.HoldAmountAboveCap || is.KeyRef != "" || is.Detail == "" {
				t.Errorf("%s: held with %q / %q, key %q", is.Customer, is.Reason, is.Detail, is.KeyRef)
			}
		}
	}
	if wantHeld < n/10 {
		t.Fatalf("only %d customers held; the scenario is too weak", wantHeld)
	}

	// refuseAll sends every key's customer amount×mult under a fresh
	// idempotency key, and wants refusal want for each.
	refuseAll := func(mult int64, salt string, want error) {
		parallel(n, 20, func(i int) {
			is := issued[i]
			if is.Held {
				return
			}
			_, err := e.charge(ctx, is.KeyRef, is.Customer, is.Currency, mult*is.Amount, salt+is.Customer)
			if got := vault.ErrorForCode(vaultCode(err)); !errors.Is(got, want) {
				t.Errorf("%s: %d×amount: got %v, want %v", is.Customer, mult, err, want)
			}
		})
	}
	refuseAll(10, "evil-", vault.ErrCapExceeded)

	var mu sync.Mutex
	charged := map[string]bool{}
	parallel(n, 20, func(i int) {
		is := issued[i]
		if is.Held {
			return
		}
		_, err := e.charge(ctx, is.KeyRef, is.Customer, is.Currency, is.Amount, "charge-"+period+"-"+is.Customer)
		if err != nil {
			t.Errorf("%s: %v", is.Customer, err)
			return
		}
		mu.Lock()
		charged[is.Customer] = true
		mu.Unlock()
	})
	if len(charged) != n-wantHeld {
		t.Fatalf("charged %d, want %d", len(charged), n-wantHeld)
	}
	refuseAll(1, "again-", vault.ErrKeyUsed)

	paid := e.paid()
	for i, is := range issued {
		got := paid[is.Customer]
		switch {
		case is.Held && got != 0:
			t.Errorf("held customer %s paid %d", is.Customer, got)
		case !is.Held && got != dues[i].req.Amount:
			t.Errorf("%s paid %d, want %d", is.Customer, got, dues[i].req.Amount)
		case got > is.Cap:
			t.Errorf("%s paid %d above cap %d", is.Customer, got, is.Cap)
		}
	}
	if len(e.sim.Ledger()) != n-wantHeld {
		t.Errorf("%d payments in Stripe, want %d", len(e.sim.Ledger()), n-wantHeld)
	}
	b, err := e.issuer.RunBudget(ctx, period)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, v := range paid {
		total += v
	}
	if b.Used != total || b.Expected != total || b.Used > b.Total {
		t.Errorf("run budget %+v, paid %d", b, total)
	}
	t.Logf("%d customers: %d charged, %d held (amount_above_cap), every tenfold request refused; budget %+v",
		n, len(charged), wantHeld, b)
}
