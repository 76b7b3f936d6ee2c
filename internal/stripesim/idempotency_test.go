package stripesim

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func TestIdempotentReplayReturnsFirstResult(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	first, err := s.charge(cust, pm, "period-2026-10/"+cust, 2500)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.LastResponse.Header.Get("Idempotent-Replayed"); got != "" {
		t.Fatalf("first request: Idempotent-Replayed=%q", got)
	}
	second, err := s.charge(cust, pm, "period-2026-10/"+cust, 2500)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID || second.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: got %s (replayed=%q), want %s", second.ID, second.LastResponse.Header.Get("Idempotent-Replayed"), first.ID)
	}
	if string(second.LastResponse.RawJSON) != string(first.LastResponse.RawJSON) {
		t.Fatal("replay body differs from the first response")
	}
	if n := len(s.ledger()); n != 1 {
		t.Fatalf("ledger: want 1 payment, got %d", n)
	}
}

func TestIdempotentReplayIncludesErrors(t *testing.T) {
	s := newSim(t)
	c, _ := s.client.V1Customers.Create(context.Background(), nil)
	_, err1 := s.charge(c.ID, "pm_card_visa_chargeDeclined", "k-decline", 1000)
	_, err2 := s.charge(c.ID, "pm_card_visa_chargeDeclined", "k-decline", 1000)
	e1, e2 := stripeErr(t, err1), stripeErr(t, err2)
	if e2.HTTPStatusCode != 402 || e2.PaymentIntent.ID != e1.PaymentIntent.ID {
		t.Fatalf("replayed decline: got %d for %s, want 402 for %s", e2.HTTPStatusCode, e2.PaymentIntent.ID, e1.PaymentIntent.ID)
	}
	if e2.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("replayed error lacks Idempotent-Replayed: true")
	}
	list := s.client.V1PaymentIntents.List(context.Background(), &stripe.PaymentIntentListParams{Customer: stripe.String(c.ID)})
	n := 0
	for _, err := range list {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("want one PaymentIntent, got %d", n)
	}
}

func TestIdempotencyKeyWithOtherParameters(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	if _, err := s.charge(cust, pm, "k1", 1000); err != nil {
		t.Fatal(err)
	}
	_, err := s.charge(cust, pm, "k1", 1001)
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("got %d %s", se.HTTPStatusCode, se.Type)
	}
	// The same key on another endpoint is also a different request.
	_, err = s.client.V1Customers.Create(context.Background(), &stripe.CustomerCreateParams{Params: stripe.Params{IdempotencyKey: stripe.String("k1")}})
	if se := stripeErr(t, err); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("other endpoint: got %s", se.Type)
	}
	if n := len(s.ledger()); n != 1 {
		t.Fatalf("ledger: want 1, got %d", n)
	}
}

// TestF7_ConcurrentChargeSameKey: a charge slower than its caller's deadline,
// and concurrent callers with the same key: exactly one PaymentIntent.
func TestF7_ConcurrentChargeSameKey(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("slow-commit=1:300ms,first=1")
	const callers = 8
	var wg sync.WaitGroup
	ids := make([]string, callers)
	codes := make([]stripe.ErrorCode, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// The first caller gives up before the commit, like a timed-out step.
			ctx := context.Background()
			if i == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			p := chargeParams(cust, pm, "same-key", 4200)
			pi, err := s.client.V1PaymentIntents.Create(ctx, p)
			if err == nil {
				ids[i] = pi.ID
			} else if se, ok := err.(*stripe.Error); ok {
				codes[i] = se.Code
			}
		}()
	}
	close(start)
	wg.Wait()
	inUse := 0
	for i := range callers {
		if codes[i] == stripe.ErrorCodeIdempotencyKeyInUse {
			inUse++
		}
	}
	if inUse == 0 {
		t.Fatalf("want some callers refused with idempotency_key_in_use, got codes %v ids %v", codes, ids)
	}
	// Once the slow commit finishes, the key replays the one payment.
	time.Sleep(350 * time.Millisecond)
	pi, err := s.charge(cust, pm, "same-key", 4200)
	if err != nil {
		t.Fatal(err)
	}
	if pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("want a replay after the commit")
	}
	for i, id := range ids {
		if id != "" && id != pi.ID {
			t.Fatalf("caller %d got PaymentIntent %s, want %s", i, id, pi.ID)
		}
	}
	if led := s.ledger(); len(led) != 1 || led[0].PaymentIntentID != pi.ID {
		t.Fatalf("ledger: want exactly %s, got %+v", pi.ID, led)
	}
}

// TestConcurrentSameKeyNoFaults races identical requests with no injected
// delay: whatever the interleaving, one PaymentIntent.
func TestConcurrentSameKeyNoFaults(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.charge(cust, pm, "race", 1500)
		}()
	}
	wg.Wait()
	if n := len(s.ledger()); n != 1 {
		t.Fatalf("ledger: want 1 payment, got %d", n)
	}
	if n := len(s.srv.st.pis); n != 1 {
		t.Fatalf("want 1 PaymentIntent, got %d", n)
	}
}

// TestF11_KeyExpiresAfter24Hours: after Stripe's window a reused key makes a
// new payment, so billrun must reconcile (list by customer) before retrying.
func TestF11_KeyExpiresAfter24Hours(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	first, err := s.charge(cust, pm, "k", 1000)
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(24*time.Hour - time.Second)
	again, err := s.charge(cust, pm, "k", 1000)
	if err != nil || again.ID != first.ID {
		t.Fatalf("just inside 24 h: want replay of %s, got %v %v", first.ID, again, err)
	}
	s.clock.Advance(time.Second)
	late, err := s.charge(cust, pm, "k", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if late.ID == first.ID || late.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("after 24 h: want a new PaymentIntent")
	}
	if n := len(s.ledger()); n != 2 {
		t.Fatalf("ledger: want 2 (the double charge the simulator must expose), got %d", n)
	}
	// What billrun must do instead: list by customer finds the first payment.
	found := false
	for pi, err := range s.client.V1PaymentIntents.List(context.Background(), &stripe.PaymentIntentListParams{Customer: stripe.String(cust)}) {
		if err != nil {
			t.Fatal(err)
		}
		found = found || pi.ID == first.ID
	}
	if !found {
		t.Fatal("list by customer does not show the first payment")
	}
}

func TestIdempotencyKeyLength(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	form := url.Values{"amount": {"1000"}, "currency": {"usd"}, "customer": {cust}, "payment_method": {pm}, "confirm": {"true"}, "off_session": {"true"}}
	status, body, _ := s.raw(http.MethodPost, "/v1/payment_intents", testKey, form, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)})
	if status != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Fatalf("256 characters: got %d %s", status, body)
	}
	if n := len(s.ledger()); n != 0 {
		t.Fatalf("refused key charged anyway: %d", n)
	}
	status, _, _ = s.raw(http.MethodPost, "/v1/payment_intents", testKey, form, map[string]string{"Idempotency-Key": strings.Repeat("k", 255)})
	if status != 200 {
		t.Fatalf("255 characters: got %d", status)
	}
	// stripe-go refuses the long key before sending it.
	if _, err := s.charge(cust, pm, strings.Repeat("k", 256), 1000); err == nil {
		t.Fatal("stripe-go sent a 256-character key")
	}
}

// TestSDKInventsKeysWhenNoneSet makes visible why billrun must set its own
// key: stripe-go generates one per call, so two calls are two payments.
func TestSDKInventsKeysWhenNoneSet(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	for range 2 {
		if _, err := s.charge(cust, pm, "", 1000); err != nil {
			t.Fatal(err)
		}
	}
	generated := 0
	for _, r := range s.srv.Requests() {
		if r.Path == "/v1/payment_intents" && r.SDKGeneratedKey {
			generated++
		}
	}
	if generated != 2 || len(s.ledger()) != 2 {
		t.Fatalf("want 2 SDK-generated keys and 2 payments, got %d and %d", generated, len(s.ledger()))
	}
	if _, err := s.charge(cust, pm, "billrun-key", 1000); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.srv.Requests() {
		if r.IdempotencyKey == "billrun-key" && r.SDKGeneratedKey {
			t.Fatal("a caller's key was flagged as SDK-generated")
		}
	}
}
