package vault_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestSettlement follows one charge through each kind of answer Stripe can give:
// a success commits, a decline (402) releases, and everything indeterminate
// (500 before or after committing, a gateway 503, a 429, a dropped connection)
// keeps the reservation until a replay or Reconcile settles it. Stripe's status,
// body and headers reach the caller unchanged.
func TestSettlement(t *testing.T) { eachBackend(t, testSettlement) }

func testSettlement(t *testing.T, be backend) {
	const amount = 1500
	type amounts struct{ spent, reserved int64 }
	tests := []struct {
		name   string
		faults stripesim.Faults
		// setup runs after the faults are set, before the charge.
		setup   func(e *env, customer string)
		pm      string
		status  int
		code    string // error code in the body, "" for none
		header  string // a header Stripe set that must come through
		first   amounts
		settle  func(e *env, ref, customer, idem, pm string) error // nil: none
		final   amounts
		payment bool // a payment exists in Stripe at the end
	}{
		{
			name: "success commits", status: 200, header: "Request-Id",
			first: amounts{amount, 0}, final: amounts{amount, 0}, payment: true,
		},
		{
			name: "decline releases", pm: "pm_card_visa_chargeDeclined", status: 402, code: "card_declined", header: "Request-Id",
			first: amounts{0, 0},
			// A replay gets Stripe's stored 402 again and is released again.
			settle: replayWant("card_declined"), final: amounts{0, 0},
		},
		{
			name: "500 after commit is kept, then reconciled as paid", faults: stripesim.Faults{Error500After: 1}, status: 500, code: "",
			first: amounts{0, amount},
			settle: func(e *env, ref, customer, idem, pm string) error {
				// Stripe replays the stored 500: still indeterminate.
				if err := replayWant("api_error")(e, ref, customer, idem, pm); err != nil {
					return err
				}
				if ks, _ := e.issuer.Key(t.Context(), ref); ks.Reserved != amount {
					t.Errorf("after replaying a 500: %+v", ks)
				}
				_, err := e.issuer.Reconcile(t.Context(), ref, idem, vault.Succeeded)
				return err
			},
			final: amounts{amount, 0}, payment: true,
		},
		{
			name: "500 before commit is kept, then reconciled as failed", faults: stripesim.Faults{Error500Before: 1}, status: 500,
			first: amounts{0, amount},
			settle: func(e *env, ref, customer, idem, pm string) error {
				_, err := e.issuer.Reconcile(t.Context(), ref, idem, vault.Failed)
				return err
			},
			final: amounts{0, 0},
		},
		{
			name: "dropped connection is kept, then settled by a replay", faults: stripesim.Faults{DropAfter: 1, FirstAttempts: 1}, status: 502, code: "vault_upstream_unavailable",
			first: amounts{0, amount}, settle: replayWant(""), final: amounts{amount, 0}, payment: true,
		},
		{
			name: "gateway 503 is kept, then settled by a replay", faults: stripesim.Faults{Gateway503: 1, FirstAttempts: 1}, status: 0, code: "non-json",
			first: amounts{0, amount}, settle: replayWant(""), final: amounts{amount, 0}, payment: true,
		},
		{
			name: "rate limit 429 is kept, then settled by a replay", faults: stripesim.Faults{RateLimit: 1},
			setup: func(e *env, customer string) {
				// Spend the limiter's only token.
				if _, err := e.direct.V1Customers.Retrieve(t.Context(), customer, nil); err != nil {
					t.Fatal(err)
				}
			},
			status: 429, code: "rate_limit", header: "Stripe-Rate-Limited-Reason",
			first: amounts{0, amount},
			settle: func(e *env, ref, customer, idem, pm string) error {
				e.sim.SetFaults(stripesim.Faults{})
				return replayWant("")(e, ref, customer, idem, pm)
			},
			final: amounts{amount, 0}, payment: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, be, envOptions{})
			ctx := t.Context()
			customer := e.customers(1)[0]
			keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: customer, Currency: "usd", Amount: amount, Ceiling: 2000}})
			if err != nil {
				t.Fatal(err)
			}
			ref, idem := keys[0].KeyRef, "charge-"+customer
			e.sim.SetFaults(tc.faults)
			if tc.setup != nil {
				tc.setup(e, customer)
			}
			pm := tc.pm
			if pm == "" {
				pm = "pm_card_visa"
			}
			pi, err := e.chargeWith(ctx, ref, customer, "usd", amount, idem, pm)
			status, code, header := answer(pi, err)
			if status != tc.status || code != tc.code {
				t.Fatalf("first answer %d %q (%v), want %d %q", status, code, err, tc.status, tc.code)
			}
			if tc.header != "" && header.Get(tc.header) == "" {
				t.Errorf("header %s did not come through: %v", tc.header, header)
			}
			e.sim.SetFaults(stripesim.Faults{})
			check := func(when string, want amounts) {
				t.Helper()
				ks, err := e.issuer.Key(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				if ks.Spent != want.spent || ks.Reserved != want.reserved {
					t.Errorf("%s: spent %d reserved %d, want %+v", when, ks.Spent, ks.Reserved, want)
				}
				b, _ := e.issuer.RunBudget(ctx, period)
				if b.Used != want.spent+want.reserved {
					t.Errorf("%s: budget used %d, want %d", when, b.Used, want.spent+want.reserved)
				}
			}
			check("after the first answer", tc.first)
			if tc.settle != nil {
				if err := tc.settle(e, ref, customer, idem, pm); err != nil {
					t.Fatalf("settle: %v", err)
				}
			}
			check("at the end", tc.final)
			if got := len(e.sim.Ledger()); (got == 1) != tc.payment || got > 1 {
				t.Errorf("%d payments in Stripe, want payment=%v", got, tc.payment)
			}
			// A committed reservation is never released.
			if tc.payment {
				if state, err := e.issuer.Reconcile(ctx, ref, idem, vault.Failed); err != nil || state != "committed" {
					t.Errorf("Reconcile(Failed) on a paid charge: %q, %v", state, err)
				}
				check("after a late failure report", tc.final)
			}
		})
	}
}

// replayWant sends the charge again through stripe-go, as a retried step
// would, and wants Stripe's error code (or type) code, or success for "".
func replayWant(code string) func(e *env, ref, customer, idem, pm string) error {
	return func(e *env, ref, customer, idem, pm string) error {
		_, err := e.chargeWith(context.Background(), ref, customer, "usd", 1500, idem, pm)
		var se *stripe.Error
		switch {
		case code == "" && err == nil:
			return nil
		case code != "" && errors.As(err, &se) && (string(se.Code) == code || string(se.Type) == code):
			return nil
		}
		return fmt.Errorf("replay: got %v, want %q", err, code)
	}
}

// answer reads stripe-go's result as status, error code and headers.
func answer(pi *stripe.PaymentIntent, err error) (int, string, http.Header) {
	var se *stripe.Error
	switch {
	case err == nil:
		return pi.LastResponse.StatusCode, "", pi.LastResponse.Header
	case errors.As(err, &se):
		var h http.Header
		if se.LastResponse != nil {
			h = se.LastResponse.Header
		}
		return se.HTTPStatusCode, string(se.Code), h
	}
	// stripe-go could not read the body: Stripe's non-JSON gateway page came
	// through as it was.
	return 0, "non-json", nil
}

// TestCallerHangsUp_StillSettled: Charge gives up while Stripe is still
// committing the payment. The proxy finishes the call on its own and commits
// the reservation, so the next attempt finds a settled key, not an
// indeterminate one.
func TestCallerHangsUp_StillSettled(t *testing.T) { eachBackend(t, testCallerHangsUp_StillSettled) }

func testCallerHangsUp_StillSettled(t *testing.T, be backend) {
	// The caller hangs up at the moment the proxy starts its call to Stripe.
	caller, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	e := newEnv(t, be, envOptions{upstream: func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			hangUp()
			return next.RoundTrip(req)
		})
	}})
	ctx := t.Context()
	customer := e.customers(1)[0]
	keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: customer, Currency: "usd", Amount: 1500, Ceiling: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	ref := keys[0].KeyRef
	if _, err := e.charge(caller, ref, customer, "usd", 1500, "charge-"+customer); !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller did not hang up: %v", err)
	}
	// The proxy is still waiting on Stripe; wait for it to settle, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ks, err := e.issuer.Key(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if ks.Spent == 1500 && ks.Reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after the caller hung up: %+v", ks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(e.sim.Ledger()) != 1 {
		t.Fatalf("%d payments", len(e.sim.Ledger()))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestF9_ReleasedKeyMakesRoomForAnother: after Stripe poisons an idempotency
// key with a stored 500 and Charge finds no payment under it, Charge releases
// the reservation and moves on to a new idempotency key on the same vault key.
// A released reservation frees the key's one live charge, never its cap; a
// released key sent again needs that room too; and only MaxReleasedPerKey
// keys may be released before a new one is refused.
func TestF9_ReleasedKeyMakesRoomForAnother(t *testing.T) {
	eachBackend(t, testReleasedKeyMakesRoomForAnother)
}

func testReleasedKeyMakesRoomForAnother(t *testing.T, be backend) {
	const amount = 1500
	e := newEnv(t, be, envOptions{})
	ctx := t.Context()
	customer := e.customers(1)[0]
	keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{{Customer: customer, Currency: "usd", Amount: amount, Ceiling: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	ref := keys[0].KeyRef
	e.sim.SetFaults(stripesim.Faults{Error500Before: 1})
	steps := []struct {
		name string
		// idem is charged (want: the vault's refusal, nil for Stripe's own
		// 500), or released by Reconcile when release is set.
		idem    string
		release bool
		want    error
	}{
		{name: "first key: Stripe's 500, kept", idem: "k0"},
		{name: "a second key while the first is live", idem: "k1", want: vault.ErrKeyUsed},
		{name: "no payment under the first: released", idem: "k0", release: true},
		{name: "second key gets through", idem: "k1"},
		{name: "the released first key, sent again, while the second is live", idem: "k0", want: vault.ErrKeyUsed},
		{name: "second released", idem: "k1", release: true},
		{name: "third key gets through", idem: "k2"},
		{name: "third released", idem: "k2", release: true},
		{name: "a fourth key after MaxReleasedPerKey releases", idem: "k3", want: vault.ErrKeyUsed},
	}
	for _, st := range steps {
		if st.release {
			if state, err := e.issuer.Reconcile(ctx, ref, st.idem, vault.Failed); err != nil || state != "released" {
				t.Fatalf("%s: %q, %v", st.name, state, err)
			}
			continue
		}
		_, err := e.charge(ctx, ref, customer, "usd", amount, st.idem)
		var se *stripe.Error
		switch {
		case st.want == nil && errors.As(err, &se) && se.HTTPStatusCode == http.StatusInternalServerError:
		case st.want != nil && errors.Is(vault.ErrorForCode(vaultCode(err)), st.want):
		default:
			t.Fatalf("%s: got %v, want %v", st.name, err, st.want)
		}
		if ks, err := e.issuer.Key(ctx, ref); err != nil || ks.Reserved > amount || ks.Spent != 0 {
			t.Fatalf("%s: key %+v (%v): more than one charge held", st.name, ks, err)
		}
	}
	if ks, err := e.issuer.Key(ctx, ref); err != nil || ks.Reserved != 0 || ks.Pending != 0 || ks.Charges != 1+vault.MaxReleasedPerKey {
		t.Errorf("key %+v (%v), want nothing held and %d reservations", ks, err, 1+vault.MaxReleasedPerKey)
	}
	if n := len(e.sim.Ledger()); n != 0 {
		t.Errorf("%d payments, want none", n)
	}
}
