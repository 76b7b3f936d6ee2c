package vault_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestReplays_OneReservation sends one request 1,000 times, 20 at a time, the
// first one slow to commit so that others arrive while it is in flight: one
// reservation, one payment, and Stripe's answers (409 in use, replays with
// Idempotent-Replayed) passed through unchanged.
func TestReplays_OneReservation(t *testing.T) { eachBackend(t, testReplays_OneReservation) }

func testReplays_OneReservation(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{faults: stripesim.Faults{SlowCommit: 1, SlowCommitDelay: 100 * time.Millisecond, FirstAttempts: 1}})
	ctx := t.Context()
	id := e.customers(1)[0]
	keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: id, Currency: "usd", Amount: 2500, Ceiling: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	ref := keys[0].KeyRef

	var ok, inUse, replayed atomic.Int64
	var mu sync.Mutex
	pis := map[string]bool{}
	replays := be.size(1000, 200)
	parallel(replays, 20, func(int) {
		pi, err := e.charge(ctx, ref, id, "usd", 2500, "charge-"+period+"-"+id)
		var se *stripe.Error
		switch {
		case err == nil:
			ok.Add(1)
			if pi.LastResponse.Header.Get("Idempotent-Replayed") == "true" {
				replayed.Add(1)
			}
			mu.Lock()
			pis[pi.ID] = true
			mu.Unlock()
		case errors.As(err, &se) && se.HTTPStatusCode == http.StatusConflict:
			// Stripe's idempotency_key_in_use while the first is executing:
			// passed through unchanged, and the reservation stays as it was.
			inUse.Add(1)
		default:
			t.Errorf("replay: %v", err)
		}
	})
	ks, err := e.issuer.Key(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Charges != 1 || ks.Spent != 2500 || ks.Reserved != 0 || ks.Pending != 0 {
		t.Errorf("after %d replays: %+v, want one committed reservation of 2500", replays, ks)
	}
	if len(e.sim.Ledger()) != 1 || len(pis) != 1 || replayed.Load() != ok.Load()-1 || inUse.Load() == 0 {
		t.Errorf("%d payments, %d PaymentIntents, %d of %d successes replayed", len(e.sim.Ledger()), len(pis), replayed.Load(), ok.Load())
	}
	b, _ := e.issuer.RunBudget(ctx, period)
	if b.Used != 2500 {
		t.Errorf("budget used %d, want 2500", b.Used)
	}
	t.Logf("%d replays: %d answered 200 (%d marked Idempotent-Replayed), %d answered 409 in use; one reservation", replays, ok.Load(), replayed.Load(), inUse.Load())
}

// TestBurst_NeverOverCap fires 60 concurrent charges with distinct idempotency
// keys at one key that allows many charges, through three proxy instances so
// that the store's transactions, not an in-memory queue, keep the cap: exactly
// as many as fit in the cap go through, the rest are refused with
// vault_cap_exceeded.
func TestBurst_NeverOverCap(t *testing.T) { eachBackend(t, testBurst_NeverOverCap) }

func testBurst_NeverOverCap(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{instances: 3, issuer: vault.IssuerConfig{MaxChargesPerKey: 100}})
	ctx := t.Context()
	id := e.customers(1)[0]
	keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: id, Currency: "usd", Amount: 10_000, Ceiling: 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	parallel(60, 30, func(i int) {
		_, err := e.charge(ctx, keys[0].KeyRef, id, "usd", 1000, fmt.Sprintf("burst-%d", i))
		switch {
		case err == nil:
			ok.Add(1)
		case vaultCode(err) == "vault_cap_exceeded":
			refused.Add(1)
		default:
			t.Errorf("burst %d: %v", i, err)
		}
	})
	ks, _ := e.issuer.Key(ctx, keys[0].KeyRef)
	if ok.Load() != 10 || refused.Load() != 50 || ks.Spent != 10_000 || ks.Reserved != 0 || e.paid()[id] != 10_000 {
		t.Errorf("burst: %d through, %d refused, key %+v, paid %d; want exactly 10 × 1000 = cap", ok.Load(), refused.Load(), ks, e.paid()[id])
	}
	t.Logf("burst of 60 on one key: %d through, %d vault_cap_exceeded, spent %d of cap 10000; %d busy answers retried", ok.Load(), refused.Load(), ks.Spent, e.busy.Load())
}

// TestRunBudget_HoldsUnderFanOut issues 100 keys whose caps (ceilings of 5000)
// are far above their expected amounts (1000), then has a compromised charge
// path send 3000 on every key from 20 parallel branches: what gets through is
// bounded by the run budget (expected × 110%), shard by shard, and refusals say
// vault_budget_exceeded. Three proxy instances share the fan-out.
func TestRunBudget_HoldsUnderFanOut(t *testing.T) { eachBackend(t, testRunBudget_HoldsUnderFanOut) }

func testRunBudget_HoldsUnderFanOut(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{instances: 3, issuer: vault.IssuerConfig{ShardSize: 25, BudgetMarginPercent: 110}})
	ctx := t.Context()
	const n = 100
	ids := e.customers(n)
	var reqs []vault.IssueRequest
	for _, id := range ids {
		reqs = append(reqs, vault.IssueRequest{Customer: id, Currency: "usd", Amount: 1000, Ceiling: 5000})
	}
	var keys []vault.Issued
	for p := 0; p < n; p += 50 {
		page, err := e.issuer.IssuePage(ctx, period, reqs[p:p+50])
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, page...)
	}
	b, _ := e.issuer.RunBudget(ctx, period)
	if b.Total != 110_000 || b.Shards != 4 || b.Expected != 100_000 {
		t.Fatalf("budget %+v, want 110,000 in 4 shards", b)
	}

	var ok, refused atomic.Int64
	parallel(n, 20, func(i int) {
		_, err := e.charge(ctx, keys[i].KeyRef, ids[i], "usd", 3000, "inflated-"+ids[i])
		switch {
		case err == nil:
			ok.Add(1)
		case vaultCode(err) == "vault_budget_exceeded":
			refused.Add(1)
		default:
			t.Errorf("%s: %v", ids[i], err)
		}
	})
	var total int64
	for _, v := range e.paid() {
		total += v
	}
	after, _ := e.issuer.RunBudget(ctx, period)
	// Each shard of 25 keys holds 27,500: nine payments of 3000 fit, a tenth
	// does not.
	if total > b.Total || total != after.Used || ok.Load() != 36 || refused.Load() != 64 {
		t.Errorf("paid %d (%d payments, %d refused), budget %+v", total, ok.Load(), refused.Load(), after)
	}
	t.Logf("fan-out: %d payments of 3000 (total %d) within a budget of %d; %d refused vault_budget_exceeded; %d busy answers retried",
		ok.Load(), total, b.Total, refused.Load(), e.busy.Load())
}
