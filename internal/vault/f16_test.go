package vault_test

import (
	"errors"
	"testing"
	"time"

	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestF16_KeyExpiresMidRun lets keys expire halfway through a run. Charges on
// an expired key are refused with vault_key_expired; Renew (or the retried page)
// issues the next generation with the same cap and what the old one spent or
// holds reserved carried over; the old credential stops working; a payment whose
// answer was lost before expiry is settled once through the new generation; and
// nothing is ever let through uncapped.
func TestF16_KeyExpiresMidRun(t *testing.T) { eachBackend(t, testF16_KeyExpiresMidRun) }

func testF16_KeyExpiresMidRun(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{issuer: vault.IssuerConfig{KeyTTL: time.Hour}})
	ctx := t.Context()
	ids := e.customers(6)
	var reqs []vault.IssueRequest
	for _, id := range ids {
		reqs = append(reqs, vault.IssueRequest{Customer: id, Currency: "eur", Amount: 4000, Ceiling: 5000})
	}
	keys, err := e.issuer.IssuePage(ctx, period, reqs)
	if err != nil {
		t.Fatal(err)
	}
	idem := func(i int) string { return "charge-" + period + "-" + ids[i] }

	// Before expiry: customer 0 is charged; customer 1's payment happens but its
	// answer is lost (the simulator commits, then drops the connection).
	if _, err := e.charge(ctx, keys[0].KeyRef, ids[0], "eur", 4000, idem(0)); err != nil {
		t.Fatal(err)
	}
	e.sim.SetFaults(stripesim.Faults{DropAfter: 1})
	_, err = e.charge(ctx, keys[1].KeyRef, ids[1], "eur", 4000, idem(1))
	if code := vaultCode(err); code != "vault_upstream_unavailable" {
		t.Fatalf("lost answer: got %v, want vault_upstream_unavailable", err)
	}
	e.sim.SetFaults(stripesim.Faults{})
	if ks, _ := e.issuer.Key(ctx, keys[1].KeyRef); ks.Reserved != 4000 || ks.Pending != 1 {
		t.Fatalf("after a lost answer: %+v, want 4000 reserved and pending", ks)
	}

	// Customer 5's answer is lost too; it will be reconciled through its old
	// reference after the renewal, and must land on the new generation.
	e.sim.SetFaults(stripesim.Faults{Error500After: 1})
	if _, err := e.charge(ctx, keys[5].KeyRef, ids[5], "eur", 4000, idem(5)); err == nil {
		t.Fatal("a forced 500 succeeded")
	}
	e.sim.SetFaults(stripesim.Faults{})

	e.clock.Advance(61 * time.Minute)

	// Expired keys are refused, whatever the request.
	for i := range 3 {
		_, err := e.charge(ctx, keys[i].KeyRef, ids[i], "eur", 4000, idem(i))
		if !errors.Is(vault.ErrorForCode(vaultCode(err)), vault.ErrKeyExpired) {
			t.Fatalf("customer %d after expiry: got %v, want vault_key_expired", i, err)
		}
	}

	// Charge renews customer 2's key; the retried page renews the others and
	// returns customer 2's new generation, not a third one.
	renewed, err := e.issuer.Renew(ctx, keys[2].KeyRef)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.issuer.IssuePage(ctx, period, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if again[2].KeyRef != renewed.KeyRef || renewed.Generation != 2 {
		t.Fatalf("retried page gave %s (gen %d), Renew gave %s", again[2].KeyRef, again[2].Generation, renewed.KeyRef)
	}
	for i, k := range again {
		if k.KeyRef == keys[i].KeyRef || k.Generation != 2 || k.Cap != keys[i].Cap || !k.ExpiresAt.After(e.clock.Now()) {
			t.Errorf("customer %d: renewed as %+v from %+v", i, k, keys[i])
		}
		if r, err := e.issuer.Renew(ctx, keys[i].KeyRef); err != nil || r.KeyRef != k.KeyRef {
			t.Errorf("Renew(old ref %d) = %s, %v; want the current generation %s", i, r.KeyRef, err, k.KeyRef)
		}
	}

	// The old credentials are dead; spent and reserved came along.
	_, err = e.charge(ctx, keys[3].KeyRef, ids[3], "eur", 4000, idem(3))
	if !errors.Is(vault.ErrorForCode(vaultCode(err)), vault.ErrUnknownKey) {
		t.Fatalf("superseded credential: got %v, want vault_unknown_key", err)
	}
	for i, want := range []struct{ spent, reserved int64 }{{4000, 0}, {0, 4000}, {0, 0}} {
		ks, err := e.issuer.Key(ctx, again[i].KeyRef)
		if err != nil {
			t.Fatal(err)
		}
		if ks.Spent != want.spent || ks.Reserved != want.reserved {
			t.Errorf("customer %d gen 2: spent %d reserved %d, want %+v", i, ks.Spent, ks.Reserved, want)
		}
	}

	// Replays through the new generation: customer 0's replay is Stripe's
	// replay and counts nothing; customer 1's settles the lost payment once;
	// customer 2 is charged normally.
	for i := range 3 {
		pi, err := e.charge(ctx, again[i].KeyRef, ids[i], "eur", 4000, idem(i))
		if err != nil || pi.Status != "succeeded" {
			t.Fatalf("customer %d through gen 2: %v", i, err)
		}
	}
	// Still capped: 4000 of 5000 are spent, a second 4000 cannot fit even if
	// the key allowed a second charge.
	_, err = e.charge(ctx, again[0].KeyRef, ids[0], "eur", 4000, "another")
	if vaultCode(err) != "vault_key_used" && vaultCode(err) != "vault_cap_exceeded" {
		t.Fatalf("second charge on a renewed key: %v", err)
	}
	for i := range 3 {
		ks, _ := e.issuer.Key(ctx, again[i].KeyRef)
		if ks.Spent != 4000 || ks.Reserved != 0 || ks.Charges != 1 {
			t.Errorf("customer %d after replays: %+v", i, ks)
		}
	}
	paid := e.paid()
	for i := range 3 {
		if paid[ids[i]] != 4000 {
			t.Errorf("customer %d paid %d, want one payment of 4000", i, paid[ids[i]])
		}
	}

	// Reconciling through the superseded reference settles the new generation.
	if state, err := e.issuer.Reconcile(ctx, keys[5].KeyRef, idem(5), vault.Succeeded); err != nil || state != "committed" {
		t.Fatalf("Reconcile through the old reference: %q, %v", state, err)
	}
	if old, _ := e.issuer.Key(ctx, keys[5].KeyRef); old.Reserved != 4000 || old.Spent != 0 || !old.Revoked {
		t.Errorf("the superseded generation changed: %+v", old)
	}
	if cur, _ := e.issuer.Key(ctx, again[5].KeyRef); cur.Spent != 4000 || cur.Reserved != 0 {
		t.Errorf("customer 5 gen 2 after Reconcile: %+v", cur)
	}

	// An operator's revocation is final: refused at the proxy, not renewed, and
	// the customer is held on a retried page.
	if err := e.issuer.Revoke(ctx, keys[4].KeyRef, "suspected leak"); err != nil {
		t.Fatal(err)
	}
	_, err = e.charge(ctx, again[4].KeyRef, ids[4], "eur", 4000, idem(4))
	if vaultCode(err) != "vault_unknown_key" {
		t.Fatalf("revoked key: %v", err)
	}
	if _, err := e.issuer.Renew(ctx, again[4].KeyRef); !errors.Is(err, vault.ErrKeyRevoked) {
		t.Fatalf("Renew of a revoked key: %v, want ErrKeyRevoked", err)
	}
	page, err := e.issuer.IssuePage(ctx, period, reqs[4:5])
	if err != nil || !page[0].Held || page[0].Reason != vault.HoldKeyRevoked {
		t.Fatalf("retried page for a revoked key: %+v, %v", page, err)
	}
	if len(e.sim.Ledger()) != 4 {
		t.Errorf("%d payments, want 4", len(e.sim.Ledger()))
	}
}
