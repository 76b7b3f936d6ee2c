package vault_test

import (
	"errors"
	"testing"
	"time"

	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestF11_ReplayAfterWindow: a repeat of a request whose reservation is live
// (committed, or pending after a lost answer) is forwarded without a new
// reservation only while Stripe still holds its idempotency key. Once the
// reservation's first use is ReplayWindow old, the vault refuses it as
// vault_reservation_stale on its own, whatever Charge's clock says: after
// Stripe prunes the key, forwarding it would be a new, uncounted payment (I3).
func TestF11_ReplayAfterWindow(t *testing.T) { eachBackend(t, testF11_ReplayAfterWindow) }

func testF11_ReplayAfterWindow(t *testing.T, be backend) {
	const amount = 4000
	tests := []struct {
		name   string
		faults stripesim.Faults // on the first request
		after  time.Duration    // before the repeat
		stale  bool             // the repeat is refused
		paid   int64            // what Stripe took in the end
	}{
		{"committed, repeated within the window: Stripe replays", stripesim.Faults{}, vault.ReplayWindow - time.Minute, false, amount},
		{"committed, repeated after the window: refused", stripesim.Faults{}, vault.ReplayWindow, true, amount},
		{"committed, repeated after Stripe pruned the key: refused", stripesim.Faults{}, 25 * time.Hour, true, amount},
		{"pending, repeated after the window: refused", stripesim.Faults{Error500After: 1, FirstAttempts: 1}, vault.ReplayWindow, true, amount},
		{"pending, never paid, repeated after the window: refused", stripesim.Faults{Error500Before: 1, FirstAttempts: 1}, vault.ReplayWindow, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, be, envOptions{})
			ctx := t.Context()
			id := e.customers(1)[0]
			keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: id, Currency: "eur", Amount: amount, Ceiling: 5000}})
			if err != nil {
				t.Fatal(err)
			}
			ref, idem := keys[0].KeyRef, "charge-"+period+"-"+id
			e.sim.SetFaults(tc.faults)
			first, _ := e.charge(ctx, ref, id, "eur", amount, idem)
			e.sim.SetFaults(stripesim.Faults{})
			before, _ := e.issuer.Key(ctx, ref)

			e.clock.Advance(tc.after)
			again, err := e.charge(ctx, ref, id, "eur", amount, idem)
			stale := errors.Is(vault.ErrorForCode(vaultCode(err)), vault.ErrReservationStale)
			switch {
			case tc.stale && !stale:
				t.Fatalf("repeat after %s: %v, want vault_reservation_stale", tc.after, err)
			case !tc.stale && (err != nil || first == nil || again.ID != first.ID):
				t.Fatalf("repeat after %s: %v %v, want Stripe's replay of %v", tc.after, again, err, first)
			}
			if got := e.paid()[id]; got != tc.paid {
				t.Errorf("Stripe took %d, want %d", got, tc.paid)
			}
			after, _ := e.issuer.Key(ctx, ref)
			if after.Spent != before.Spent || after.Reserved != before.Reserved {
				t.Errorf("key changed by the repeat: %+v, then %+v", before, after)
			}
		})
	}
}
