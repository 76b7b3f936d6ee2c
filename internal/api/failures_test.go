package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
)

// TestF1_StoreWriteFailsAfterCharge: the write recording a successful charge
// fails (or commits with its reply lost); the step is retried; one payment,
// recorded once. Faults come from the store's faultstore wrapper.
func TestF1_StoreWriteFailsAfterCharge(t *testing.T) {
	// c000's record is written by the page, by the attempt, then by the
	// settlement: the third write is the one after the charge.
	const settle = "runs/" + period + "/charges/c000@3"
	cases := []struct {
		name      string
		faults    string
		customers int
		// attempts and replays for c000, when checked (-1: not checked).
		attempts, replays int
	}{
		{"settlement write fails", "commit_fail=" + settle, 3, 2, 1},
		{"settlement reply lost", "commit_lost=" + settle, 3, 1, 0},
		{"random charge-record faults", "seed=7,commit_fail=charges:0.3,commit_lost=charges:0.15", 12, -1, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b store.Backend) {
				wrap, injected := withFaults(t, tc.faults, false)
				e := newEnv(t, b, envOptions{wrap: wrap})
				e.seed(visa(tc.customers)...)
				res := e.runWorkflow("exec-1", 5, 2)
				if injected() == 0 {
					t.Fatal("no store fault was injected")
				}
				t.Logf("%d store faults injected; %d Charge calls for %d customers", injected(), res.charges, tc.customers)
				e.assertSummary(res.summary, int64(tc.customers), map[string]int64{"succeeded": int64(tc.customers)})
				recs := e.assertAllTerminal()
				if tc.attempts < 0 {
					return
				}
				if got := recs["c000"].Attempts; got != int64(tc.attempts) {
					t.Errorf("c000 attempts = %d, want %d", got, tc.attempts)
				}
				replays := 0
				for _, r := range e.stripePosts() {
					if r.Replayed {
						replays++
					}
				}
				if replays != tc.replays {
					t.Errorf("%d replayed Stripe answers, want %d", replays, tc.replays)
				}
			})
		})
	}
}

// TestF3_SecondExecutionAlreadyRunning: the scheduler fires twice and an
// operator starts a third run while one is active; only one works.
func TestF3_SecondExecutionAlreadyRunning(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(5)...)
		// Two scheduler fires at once: exactly one claims.
		var wg sync.WaitGroup
		got := make([]string, 2)
		for i, exec := range []string{"sched-a", "sched-b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = e.preflight(exec).str("status")
			}()
		}
		wg.Wait()
		if !(got[0] == "claimed" && got[1] == "already_running" || got[0] == "already_running" && got[1] == "claimed") {
			t.Fatalf("two fires answered %v, want one claimed and one already_running", got)
		}
		owner := "sched-a"
		if got[1] == "claimed" {
			owner = "sched-b"
		}
		// The operator's run ends at once, saying why.
		if op := e.runWorkflow("operator-1", 10, 2); op.preflight != "already_running" || op.charges != 0 {
			t.Fatalf("operator run: %s after %d charges", op.preflight, op.charges)
		}
		// The owner resumes its own claim (a retried preflight step) and finishes.
		res := e.runWorkflow(owner, 2, 2)
		if res.preflight != "resumed" {
			t.Fatalf("owner's preflight retry = %s", res.preflight)
		}
		e.assertSummary(res.summary, 5, map[string]int64{"succeeded": 5})
		e.assertAllTerminal()
		run, err := billing.GetRun(t.Context(), b, period)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Executions) != 3 {
			t.Errorf("executions recorded = %v, want all three", run.Executions)
		}
	})
}

// TestF4_ExecutionDiesAfterPreflight: an execution claims, charges part of the
// period and dies; a later one waits for the lease to expire, resumes, and
// nobody is charged twice.
func TestF4_ExecutionDiesAfterPreflight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(7)...)
		if pf := e.preflight("dead"); pf.str("status") != "claimed" {
			t.Fatalf("preflight: %v", pf.body)
		}
		page := e.issue(period, "dead", "", 3)
		wantStatus(t, page, http.StatusOK, "")
		for _, id := range []string{"c000", "c001"} {
			wantStatus(t, e.charge(id), http.StatusOK, "charged")
		}
		// The execution dies here. A new one is refused while the lease lives…
		if pf := e.preflight("later"); pf.str("status") != "already_running" {
			t.Fatalf("preflight under a live lease: %v", pf.body)
		}
		// …and takes over once it expired.
		e.clock.Advance(testLease + time.Second)
		if pf := e.preflight("later"); pf.str("status") != "resumed" || pf.str("previous_owner") != "dead" {
			t.Fatalf("preflight after expiry: %v", pf.body)
		}
		// The dead execution, if it comes back, has lost the lease.
		back := e.call("IssueVaultKeys", map[string]any{"period": period, "execution_id": "dead", "cursor": "c002"})
		if back.status != http.StatusConflict || back.str("error") != "lease_lost" {
			t.Errorf("returning execution: %d %v, want 409 lease_lost", back.status, back.body)
		}
		res := e.runWorkflow("later", 3, 2)
		if res.preflight != "resumed" {
			t.Fatalf("preflight after expiry = %s", res.preflight)
		}
		for _, id := range []string{"c000", "c001"} {
			if _, listed := res.outcomes[id]; listed {
				t.Errorf("%s was settled by the dead execution but listed again", id)
			}
		}
		e.assertSummary(res.summary, 7, map[string]int64{"succeeded": 7})
		e.assertAllTerminal()
		if n := len(e.stripePosts()); n != 7 {
			t.Errorf("%d Stripe charge requests, want 7", n)
		}
		// Its late charge of a settled customer changes nothing.
		wantStatus(t, e.charge("c001"), http.StatusOK, "already_charged")
		e.assertLedgerOnce()
	})
}

// TestF7_ChargeSlowerThanCallerDeadline: the caller gives up on a slow charge
// and a second call starts on another instance while the first is still in
// flight: it is told to retry; the first call's answer is still recorded; one
// key, one payment.
func TestF7_ChargeSlowerThanCallerDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		atStripe := make(chan struct{}, 10)
		e := newEnv(t, b, envOptions{
			instances: 2,
			faults:    stripesim.Faults{SlowCommit: 1, SlowCommitDelay: 300 * time.Millisecond, FirstAttempts: 1},
			onStripe: func(r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" {
					atStripe <- struct{}{}
				}
			},
		})
		e.seed(visa(1)...)
		e.issueAll("exec-1")
		ctx, giveUp := context.WithCancel(t.Context())
		firstDone := make(chan reply, 1)
		go func() {
			firstDone <- e.postCtx(ctx, e.http, 0, "Charge", map[string]any{"period": period, "customer_id": "c000", "key_ref": e.keyRef(period, "c000")})
		}()
		select {
		case <-atStripe: // the first call's request reached Stripe and is slow…
		case r := <-firstDone:
			t.Fatalf("first call answered %d %v (%v) before reaching Stripe", r.status, r.body, r.err)
		case <-time.After(30 * time.Second):
			t.Fatal("first call never reached Stripe")
		}
		giveUp() // …so its caller's deadline passes.
		if r := <-firstDone; r.err == nil {
			t.Fatalf("first call answered %d %v before its caller gave up", r.status, r.body)
		}
		// A second call on another instance sends the same key while the first
		// request is still in flight: Stripe refuses it (409), so retry later.
		second := e.chargeOn(1, "c000")
		wantStatus(t, second, http.StatusServiceUnavailable, "retry")
		if second.header.Get("Retry-After") == "" || second.str("error_code") != "idempotency_key_in_use" {
			t.Errorf("second call: %v, Retry-After %q", second.body, second.header.Get("Retry-After"))
		}
		// A call on the first instance waits its turn behind the abandoned
		// attempt, which still commits and is recorded.
		wantStatus(t, e.chargeOn(0, "c000"), http.StatusOK, "already_charged")
		wantStatus(t, e.chargeOn(1, "c000"), http.StatusOK, "already_charged")
		e.assertAllTerminal()
		posts := e.stripePosts()
		if len(posts) != 2 || posts[0].IdempotencyKey != posts[1].IdempotencyKey {
			t.Errorf("Stripe requests %+v, want 2 with one key", posts)
		}
		if rec := e.record("c000"); rec.State != billing.StateSucceeded || rec.Attempts != 2 {
			t.Errorf("record %s after %d attempts, want succeeded after 2", rec.State, rec.Attempts)
		}
	})
}

// TestF8_CrashAfterStripeAnswered: the function dies after Stripe answered and
// before the record was written; the retry replays the same payment.
func TestF8_CrashAfterStripeAnswered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		// c000's record is written by the page, by the attempt, then by the
		// settlement: the process dies instead of the third write.
		wrap, _ := withFaults(t, "commit_fail=runs/"+period+"/charges/c000@3", true)
		e := newEnv(t, b, envOptions{wrap: wrap})
		e.seed(visa(2)...)
		e.issueAll("exec-1")
		if r := e.charge("c000"); r.err == nil {
			t.Fatalf("the crash did not drop the connection: %d %v", r.status, r.body)
		}
		if rec := e.record("c000"); rec.State != billing.StatePending || rec.Attempts != 1 {
			t.Fatalf("after the crash: %s, %d attempts; want pending, 1", rec.State, rec.Attempts)
		}
		if n := len(e.assertLedgerOnce()); n != 1 {
			t.Fatalf("Stripe has %d payments before the retry, want 1", n)
		}
		res := e.runWorkflow("exec-1", 10, 1)
		e.assertSummary(res.summary, 2, map[string]int64{"succeeded": 2})
		e.assertAllTerminal()
	})
}

// TestF9_ResponseLostAfterCommit: Stripe commits and the connection drops
// before the answer arrives; the retry replays the same payment.
func TestF9_ResponseLostAfterCommit(t *testing.T) {
	cases := []struct {
		name   string
		faults stripesim.Faults
	}{
		{"dropped connection", stripesim.Faults{DropAfter: 1, FirstAttempts: 1}},
		{"500 after commit", stripesim.Faults{Error500After: 1, FirstAttempts: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b store.Backend) {
				e := newEnv(t, b, envOptions{faults: tc.faults, noKeepAlive: true})
				e.seed(visa(1)...)
				e.issueAll("exec-1")
				first := e.charge("c000")
				wantStatus(t, first, http.StatusServiceUnavailable, "retry")
				e.setFaults(stripesim.Faults{})
				if n := len(e.assertLedgerOnce()); n != 1 {
					t.Fatalf("the payment happened %d times before the retry, want 1", n)
				}
				wantStatus(t, e.charge("c000"), http.StatusOK, "charged")
				e.assertAllTerminal()
				if rec := e.record("c000"); rec.State != billing.StateSucceeded {
					t.Fatalf("record %s", rec.State)
				}
			})
		})
	}
}

// TestF10_CardDeclined: a decline is recorded, answered 422 and never retried.
func TestF10_CardDeclined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(cust{id: "d1", pm: "pm_card_visa_chargeDeclined", amount: 2500}, cust{id: "c1", pm: "pm_card_visa", amount: 2500})
		res := e.runWorkflow("exec-1", 10, 2)
		if res.outcomes["d1"] != "declined" || res.charges != 2 {
			t.Fatalf("outcomes %v after %d charge calls", sortedOutcomes(res.outcomes), res.charges)
		}
		posts := len(e.stripePosts())
		again := e.charge("d1")
		wantStatus(t, again, http.StatusUnprocessableEntity, "declined")
		if again.str("decline_code") != "generic_decline" || again.str("customer_id") != "d1" || again.str("reason") == "" {
			t.Errorf("422 body %v", again.body)
		}
		if len(e.stripePosts()) != posts {
			t.Errorf("a declined charge reached Stripe again")
		}
		e.assertSummary(res.summary, 2, map[string]int64{"succeeded": 1, "declined": 1})
		e.assertAllTerminal()
	})
}

// TestF15_SlowPageKeepsLease: a page whose charges outlast the lease (a
// rate-limit storm's backoff) keeps the lease with its owner, because each
// Charge on its behalf renews it once less than half is left; a second
// execution's preflight during the page answers already_running (I4). The
// lease is written at most about once per half-lease, not once per charge,
// and only for its owner.
func TestF15_SlowPageKeepsLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(visa(8)...)
		e.issueAll("exec-1")
		lease := func() time.Time {
			run, err := billing.GetRun(t.Context(), e.store, period)
			if err != nil {
				t.Fatal(err)
			}
			if run.Owner != "exec-1" {
				t.Fatalf("run owned by %s, want exec-1", run.Owner)
			}
			return run.LeaseExpiresAt
		}
		steps := []struct {
			after   time.Duration // since the previous step
			as      string        // execution_id sent
			renewed bool
		}{
			{time.Minute, "exec-1", false},     // 9 of 10 minutes left
			{3 * time.Minute, "exec-1", false}, // 6 left
			{2 * time.Minute, "exec-2", false}, // 4 left, not the owner
			{0, "", false},                     // 4 left, no owner named
			{0, "exec-1", true},                // 4 left: renewed to 10
			{time.Minute, "exec-1", false},     // 9 left
			{5 * time.Minute, "exec-1", false}, // 4 left... renewed below
		}
		steps[len(steps)-1].renewed = true
		for i, st := range steps {
			e.clock.Advance(st.after)
			before := lease()
			id := fmt.Sprintf("c%03d", i)
			wantStatus(t, e.chargeAs(st.as, id), http.StatusOK, "charged")
			after := lease()
			if renewed := after.After(before); renewed != st.renewed {
				t.Errorf("step %d (%s as %q): lease %s → %s, renewed %v, want %v", i, id, st.as, before, after, renewed, st.renewed)
			}
			if st.renewed && !after.Equal(e.clock.Now().Add(billing.DefaultLease)) {
				t.Errorf("step %d: lease renewed to %s, want now + %s", i, after, billing.DefaultLease)
			}
			if got := e.preflight("exec-2").str("status"); got != "already_running" {
				t.Fatalf("step %d: a second execution's preflight answered %q, want already_running", i, got)
			}
		}
		// 17 minutes in, past the first lease: still exec-1's.
		if res := e.runWorkflow("exec-1", 10, 2); res.preflight != "resumed" {
			t.Fatalf("owner's preflight = %s", res.preflight)
		}
	})
}

// TestF11_StalePendingReconciled: a pending record outlives Stripe's 24 h key
// window; the next attempt lists the customer's PaymentIntents first. The
// window may be seen by Charge itself (its stale-pending path), or only by the
// vault when its clock runs ahead of Charge's: the vault then refuses to
// forward on its own (vault_reservation_stale) and Charge reconciles. One
// payment either way, counted once by the key.
func TestF11_StalePendingReconciled(t *testing.T) {
	outcomes := []struct {
		name string
		// faults make the first attempt leave the record pending.
		faults stripesim.Faults
		// paid: whether the first attempt made a payment.
		paid bool
	}{
		{"payment made, answer lost", stripesim.Faults{Error500After: 1, FirstAttempts: 1}, true},
		{"no payment made", stripesim.Faults{LockTimeout: 1, FirstAttempts: 1}, false},
	}
	staleness := []struct {
		name string
		// later is how long after the first attempt Charge is called again.
		later time.Duration
		// vaultAhead is how far the vault's clock runs ahead of Charge's.
		vaultAhead time.Duration
		// chargeStale: Charge itself sees the record past its window.
		chargeStale bool
	}{
		// A day and more later, Stripe has forgotten the key: a new request
		// under it would charge again.
		{"stale to Charge", 25 * time.Hour, 0, true},
		// 22 h later for Charge (not stale), 24 h for the vault (stale).
		{"stale only to the vault", 22 * time.Hour, 2 * time.Hour, false},
	}
	for _, st := range staleness {
		for _, tc := range outcomes {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				forEachBackend(t, func(t *testing.T, b store.Backend) {
					e := newEnv(t, b, envOptions{faults: tc.faults})
					e.seed(visa(1)...)
					e.issueAll("exec-1")
					first := e.charge("c000")
					if first.status != http.StatusServiceUnavailable && first.status != http.StatusTooManyRequests {
						t.Fatalf("first attempt: %d %v", first.status, first.body)
					}
					e.vaultAhead.Store(int64(st.vaultAhead))
					e.clock.Advance(st.later)
					e.setFaults(stripesim.Faults{})
					postsBefore := len(e.stripePosts())
					r := e.charge("c000")
					wantStatus(t, r, http.StatusOK, "charged")
					if len(e.assertLedgerOnce()) != 1 {
						t.Fatalf("want exactly one payment")
					}
					e.assertAllTerminal()
					rec := e.record("c000")
					newPosts := len(e.stripePosts()) - postsBefore
					if tc.paid && (newPosts != 0 || r.body["reconciled"] != true) {
						t.Errorf("adopting: %d new requests, body %v; want 0 and reconciled", newPosts, r.body)
					}
					if !tc.paid && newPosts != 1 {
						t.Errorf("no payment found: %d new requests, want 1", newPosts)
					}
					if st.chargeStale {
						assertReconciledRecord(t, e, rec, tc.paid)
					}
					// The key's reservation, kept since the lost answer, is settled.
					ks, err := e.issuer.Key(t.Context(), rec.KeyRef)
					if err != nil || ks.Pending != 0 || ks.Reserved != 0 || ks.Spent != rec.Amount {
						t.Errorf("vault key after reconciliation: %+v (%v), want %d spent and nothing pending", ks, err, rec.Amount)
					}
				})
			})
		}
	}
}

// assertReconciledRecord checks what Charge's own stale-pending path writes:
// the record says what listing found, and the list API (not search) was used.
func assertReconciledRecord(t *testing.T, e *env, rec billing.ChargeRecord, paid bool) {
	t.Helper()
	if paid {
		if want := "adopted " + rec.PaymentIntent; rec.Reconciliation != want {
			t.Errorf("record reconciliation %q, want %q", rec.Reconciliation, want)
		}
	} else if !strings.HasPrefix(rec.Reconciliation, "no PaymentIntent carries this key") {
		t.Errorf("record reconciliation %q; want the record saying no payment was found", rec.Reconciliation)
	}
	if rec.ReconciledAt.IsZero() {
		t.Errorf("record does not say it was reconciled")
	}
	listed := false
	for _, q := range e.sim.Requests() {
		listed = listed || q.Method == http.MethodGet && q.Path == "/v1/payment_intents"
	}
	if !listed {
		t.Errorf("no list request: reconciliation must use the list API")
	}
}

// TestF12_RetriesBounded: workflow retries × function × SDK: the SDK never
// retries (one Stripe request per Charge call), one key throughout, attempts
// counted honestly, and a replayed error keeps the customer pending rather than
// inventing a new request.
func TestF12_RetriesBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{faults: stripesim.Faults{Gateway503: 1, FirstAttempts: 2}})
		e.seed(visa(1)...)
		e.issueAll("exec-1")
		r, calls := e.chargeUntilSettled("c000", 10)
		wantStatus(t, r, http.StatusOK, "charged")
		posts := e.stripePosts()
		if calls != 3 || len(posts) != 3 {
			t.Fatalf("%d Charge calls made %d Stripe requests, want 3 and 3 (no SDK retries)", calls, len(posts))
		}
		for _, p := range posts {
			if p.SDKGeneratedKey || p.IdempotencyKey != posts[0].IdempotencyKey {
				t.Errorf("request with key %q (sdk-generated %v), want billrun's one key", p.IdempotencyKey, p.SDKGeneratedKey)
			}
		}
		if rec := e.record("c000"); rec.Attempts != 3 || rec.IdempotencyKey != posts[0].IdempotencyKey {
			t.Errorf("record: %d attempts, key %q", rec.Attempts, rec.IdempotencyKey)
		}
		e.assertLedgerOnce()

		// A stored 500 replays under the key: no new request under it, and
		// the key rotates a bounded number of times (TestF12_Repeated500sBounded).
		e.seed(cust{id: "c900", pm: "pm_card_visa", amount: 1200})
		e.setFaults(stripesim.Faults{Error500Before: 1, FirstAttempts: 1})
		res := e.runWorkflow("exec-1", 10, 1)
		e.assertSummary(res.summary, 2, map[string]int64{"succeeded": 1, "held_for_review": 1})
		if rec := e.record("c900"); rec.State != billing.StateHeldForReview || rec.Attempts != 7 || rec.KeyGeneration != 2 {
			t.Errorf("c900: %s after %d attempts, key generation %d; want held_for_review after 7, 2", rec.State, rec.Attempts, rec.KeyGeneration)
		}
		if n := len(e.assertLedgerOnce()); n != 1 {
			t.Errorf("%d payments, want 1", n)
		}
	})
}

// TestF14_AuthenticationRequired: an off-session payment needing
// authentication is recorded requires_action and not retried.
func TestF14_AuthenticationRequired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		e.seed(cust{id: "a1", pm: "pm_card_authenticationRequired", amount: 4200})
		res := e.runWorkflow("exec-1", 10, 1)
		if res.outcomes["a1"] != "requires_action" {
			t.Fatalf("outcome %v", res.outcomes)
		}
		posts := len(e.stripePosts())
		wantStatus(t, e.charge("a1"), http.StatusUnprocessableEntity, "requires_action")
		if len(e.stripePosts()) != posts || posts != 1 {
			t.Errorf("%d Stripe requests, want exactly 1", len(e.stripePosts()))
		}
		e.assertSummary(res.summary, 1, map[string]int64{"requires_action": 1})
		e.assertAllTerminal()
	})
}

// TestF15_RateLimitStorm: Stripe rate-limits hard; callers back off on
// Retry-After; no duplicates and the run completes.
func TestF15_RateLimitStorm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{faults: stripesim.Faults{RateLimit: 2, LockTimeout: 0.2}})
		e.seed(visa(20)...)
		res := e.runWorkflow("exec-1", 5, 4)
		e.assertSummary(res.summary, 20, map[string]int64{"succeeded": 20})
		e.assertAllTerminal()
		limited := 0
		for _, r := range e.sim.Requests() {
			if r.Status == http.StatusTooManyRequests {
				limited++
			}
		}
		if limited == 0 {
			t.Fatalf("no request was rate limited: the storm did not happen")
		}
		t.Logf("%d of %d Stripe requests rate limited; %d Charge calls for 20 customers", limited, len(e.sim.Requests()), res.charges)
	})
}

// TestF9_Replayed500ReconciledImmediately: Stripe answers 500 and stores it
// under the key, so every retry gets the replay. A replay means the first
// request has finished: the list API says at once whether it paid. A payment
// is adopted; without one, the key is rotated (the old one kept, with why) and
// the charge made under the new key, through the same vault key and cap.
func TestF9_Replayed500ReconciledImmediately(t *testing.T) {
	cases := []struct {
		name   string
		faults stripesim.Faults
		paid   bool // whether the first request made the payment
	}{
		{"500 before commit", stripesim.Faults{Error500Before: 1, FirstAttempts: 1}, false},
		{"500 after commit", stripesim.Faults{Error500After: 1, FirstAttempts: 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b store.Backend) {
				e := newEnv(t, b, envOptions{faults: tc.faults})
				e.seed(visa(1)...)
				e.issueAll("exec-1")
				wantStatus(t, e.charge("c000"), http.StatusServiceUnavailable, "retry")
				firstKey := e.record("c000").IdempotencyKey
				// The outage is over, but Stripe replays the stored 500.
				e.setFaults(stripesim.Faults{})
				r := e.charge("c000")
				wantStatus(t, r, http.StatusOK, "charged")
				if n := len(e.assertLedgerOnce()); n != 1 {
					t.Fatalf("%d payments, want exactly 1", n)
				}
				e.assertAllTerminal()
				rec := e.record("c000")
				posts := e.stripePosts()
				if len(posts) < 2 || !posts[1].Replayed || posts[1].IdempotencyKey != firstKey {
					t.Fatalf("Stripe requests %+v: want the retry to get the replayed 500", posts)
				}
				if tc.paid {
					if len(posts) != 2 || r.body["reconciled"] != true || rec.KeyGeneration != 0 || len(rec.RetiredKeys) != 0 {
						t.Errorf("adopting: %d requests, body %v, key generation %d; want 2 (no new request), reconciled, 0",
							len(posts), r.body, rec.KeyGeneration)
					}
					if want := "adopted " + rec.PaymentIntent; rec.Reconciliation != want {
						t.Errorf("record reconciliation %q, want %q", rec.Reconciliation, want)
					}
				} else {
					if len(posts) != 3 || posts[2].IdempotencyKey != rec.IdempotencyKey || rec.IdempotencyKey == firstKey {
						t.Errorf("Stripe requests %+v: want a third one, under the record's new key", posts)
					}
					if rec.KeyGeneration != 1 || len(rec.RetiredKeys) != 1 || rec.RetiredKeys[0].IdempotencyKey != firstKey ||
						!strings.Contains(rec.RetiredKeys[0].Reason, "no PaymentIntent carries it") || rec.RetiredKeys[0].RetiredAt.IsZero() {
						t.Errorf("record key generation %d, retired %+v; want 1 and the first key with why", rec.KeyGeneration, rec.RetiredKeys)
					}
					if want := billing.IdempotencyKey(billing.PurposeCharge, period, "c000", rec.Amount, rec.Currency, 1); rec.IdempotencyKey != want {
						t.Errorf("new key %q, want %q (derived from the business fields and the generation)", rec.IdempotencyKey, want)
					}
					if rec.Attempts != 3 {
						t.Errorf("attempts %d, want 3 (first, replay, new key)", rec.Attempts)
					}
				}
				// One vault key carried it all: the payment spent, nothing
				// pending or reserved, the poisoned key's reservation released.
				ks, err := e.issuer.Key(t.Context(), rec.KeyRef)
				if err != nil || ks.Spent != rec.Amount || ks.Reserved != 0 || ks.Pending != 0 || ks.Charges != len(posts)-1 {
					t.Errorf("vault key %+v (%v), want %d spent, nothing pending, %d reservations", ks, err, rec.Amount, len(posts)-1)
				}
			})
		})
	}
}

// TestF12_Repeated500sBounded: Stripe answers 500 to every first request under
// every key: rotations are bounded, the customer is held for review with the
// reason (so the run completes, I2), no payment is made, and the vault holds
// nothing for it.
func TestF12_Repeated500sBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{faults: stripesim.Faults{Error500Before: 1, FirstAttempts: 1}})
		e.seed(visa(1)...)
		res := e.runWorkflow("exec-1", 10, 1)
		// Calls: the first request's 500; the replay, whose listing gets a 500
		// too (the fault hits every request's first try); the replay again,
		// listed, rotated, and the new key's 500; that replayed, rotated again,
		// 500; that replayed, and no rotation left: held.
		if res.outcomes["c000"] != "held_for_review" || res.charges != 5 {
			t.Fatalf("outcomes %v after %d Charge calls, want held_for_review after 5", sortedOutcomes(res.outcomes), res.charges)
		}
		e.assertSummary(res.summary, 1, map[string]int64{"held_for_review": 1})
		e.assertAllTerminal()
		if n := len(e.assertLedgerOnce()); n != 0 {
			t.Errorf("%d payments, want none", n)
		}
		rec := e.record("c000")
		if rec.ErrorCode != "key_rotations_exhausted" || !strings.Contains(rec.Reason, "no payment was made") {
			t.Errorf("record %s: %s", rec.ErrorCode, rec.Reason)
		}
		posts := e.stripePosts()
		keys := map[string]int{}
		for _, p := range posts {
			keys[p.IdempotencyKey]++
		}
		if rec.KeyGeneration != 2 || len(rec.RetiredKeys) != 2 || len(keys) != 3 || rec.Attempts != 7 || len(posts) != 7 {
			t.Errorf("key generation %d, %d retired, requests by key %v, %d attempts; want 2, 2, 3 keys, 7 attempts and requests",
				rec.KeyGeneration, len(rec.RetiredKeys), keys, rec.Attempts)
		}
		for i, k := range append(rec.RetiredKeys, billing.RetiredKey{IdempotencyKey: rec.IdempotencyKey}) {
			if want := billing.IdempotencyKey(billing.PurposeCharge, period, "c000", rec.Amount, rec.Currency, int64(i)); k.IdempotencyKey != want {
				t.Errorf("key of generation %d is %q, want %q", i, k.IdempotencyKey, want)
			}
		}
		ks, err := e.issuer.Key(t.Context(), rec.KeyRef)
		if err != nil || ks.Spent != 0 || ks.Reserved != 0 || ks.Pending != 0 {
			t.Errorf("vault key %+v (%v), want nothing spent or held", ks, err)
		}
		wantStatus(t, e.charge("c000"), http.StatusUnprocessableEntity, "held_for_review")
		if n := len(e.stripePosts()); n != 7 {
			t.Errorf("%d Stripe requests after the hold, want still 7", n)
		}
	})
}
