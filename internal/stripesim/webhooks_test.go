package stripesim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

const testWebhookSecret = "whsec_simulator_test"

// receiver is a webhook endpoint that verifies signatures with stripe-go.
type receiver struct {
	mu       sync.Mutex
	events   []stripe.Event
	failNext int // answer 500 to this many deliveries
	badSig   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), testWebhookSecret)
	if err != nil {
		rc.badSig++
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	if rc.failNext > 0 {
		rc.failNext--
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	rc.events = append(rc.events, ev)
}

func (rc *receiver) received() []stripe.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripe.Event(nil), rc.events...)
}

func newWebhookSim(t *testing.T, rc *receiver) *sim {
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	return newSim(t, func(c *Config) {
		c.WebhookURL = hook.URL
		c.WebhookSecret = testWebhookSecret
		c.WebhookRetries = []time.Duration{time.Minute, time.Hour}
	})
}

func TestWebhooksAreSignedLikeStripe(t *testing.T) {
	rc := &receiver{}
	s := newWebhookSim(t, rc)
	cust, pm := s.customer("pm_card_visa")
	ok, _ := s.charge(cust, pm, "k1", 1000)
	_, err := s.charge(cust, "pm_card_visa_chargeDeclined", "k2", 1000)
	failed := stripeErr(t, err).PaymentIntent.ID
	n, err := s.srv.DeliverWebhooks(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("deliver: %d, %v", n, err)
	}
	got := rc.received()
	if len(got) != 2 || rc.badSig != 0 {
		t.Fatalf("want 2 verified events, got %d (bad signatures %d)", len(got), rc.badSig)
	}
	if got[0].Type != eventPISucceeded || got[0].Data.Object["id"] != ok.ID || got[1].Type != eventPIFailed || got[1].Data.Object["id"] != failed {
		t.Fatalf("events: %s %v, %s %v", got[0].Type, got[0].Data.Object["id"], got[1].Type, got[1].Data.Object["id"])
	}
	if got[0].Request.IdempotencyKey != "k1" {
		t.Fatalf("event request: %+v", got[0].Request)
	}
	if n, _ := s.srv.DeliverWebhooks(context.Background()); n != 0 {
		t.Fatalf("delivered events sent again: %d", n)
	}
}

func TestSignWebhookMatchesStripeGo(t *testing.T) {
	payload := []byte(`{"id":"evt_1","object":"event","api_version":"` + APIVersion + `","type":"payment_intent.succeeded","data":{"object":{}}}`)
	now := time.Now()
	want := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: "whsec_x", Timestamp: now})
	if got := SignWebhook("whsec_x", now, payload); got != want.Header {
		t.Fatalf("got %s, want %s", got, want.Header)
	}
}

// TestF13_WebhookRetriesAndDuplicates: failed deliveries are retried on the
// simulator's clock, exhausted ones are listed with delivery_success=false,
// and the duplicate fault delivers an event twice.
func TestF13_WebhookRetriesAndDuplicates(t *testing.T) {
	rc := &receiver{failNext: 100}
	s := newWebhookSim(t, rc)
	ctx := context.Background()
	cust, pm := s.customer("pm_card_visa")
	pi, _ := s.charge(cust, pm, "k1", 1000)

	undelivered := func() int {
		n := 0
		for _, err := range s.client.V1Events.List(ctx, &stripe.EventListParams{DeliverySuccess: stripe.Bool(false)}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	s.srv.DeliverWebhooks(ctx) // attempt 1 fails
	if n, _ := s.srv.DeliverWebhooks(ctx); n != 0 {
		t.Fatal("retried before its delay")
	}
	s.clock.Advance(time.Minute)
	s.srv.DeliverWebhooks(ctx) // attempt 2 fails
	if undelivered() != 1 {
		t.Fatal("pending event not listed as undelivered")
	}
	s.clock.Advance(time.Hour)
	s.srv.DeliverWebhooks(ctx) // attempt 3 fails: retries exhausted
	s.clock.Advance(24 * time.Hour)
	if n, _ := s.srv.DeliverWebhooks(ctx); n != 0 {
		t.Fatal("an exhausted event was attempted again")
	}
	if undelivered() != 1 || len(rc.received()) != 0 {
		t.Fatal("failed event must stay listable with delivery_success=false")
	}

	rc.mu.Lock()
	rc.failNext = 0
	rc.mu.Unlock()
	s.setFaults("webhook-dup=1")
	s.charge(cust, pm, "k2", 1000)
	s.srv.DeliverWebhooks(ctx)
	got := rc.received()
	if len(got) != 2 || got[0].ID != got[1].ID {
		t.Fatalf("want one event delivered twice, got %d", len(got))
	}
	var delivered []string
	for ev, err := range s.client.V1Events.List(ctx, &stripe.EventListParams{DeliverySuccess: stripe.Bool(true)}) {
		if err != nil {
			t.Fatal(err)
		}
		delivered = append(delivered, ev.ID)
	}
	if len(delivered) != 1 || delivered[0] != got[0].ID || got[0].Data.Object["id"] == pi.ID {
		t.Fatalf("delivery_success=true: got %v", delivered)
	}
}

// TestF13_WebhooksOutOfOrder: with webhook-reorder a sweep may deliver newer
// events first; the same seed gives the same order.
func TestF13_WebhooksOutOfOrder(t *testing.T) {
	order := func() []string {
		rc := &receiver{}
		s := newWebhookSim(t, rc)
		cust, pm := s.customer("pm_card_visa")
		s.setFaults("webhook-reorder=1")
		var created []string
		for i := range 6 {
			pi, err := s.charge(cust, pm, fmt.Sprintf("k%d", i), 1000)
			if err != nil {
				t.Fatal(err)
			}
			created = append(created, pi.ID)
		}
		s.srv.DeliverWebhooks(context.Background())
		var got []string
		for _, ev := range rc.received() {
			got = append(got, ev.Data.Object["id"].(string))
		}
		if len(got) != 6 {
			t.Fatalf("delivered %d of 6", len(got))
		}
		same := true
		for i := range got {
			same = same && got[i] == created[i]
		}
		if same {
			t.Fatal("webhook-reorder=1 delivered in creation order")
		}
		// Return positions, not ids (ids are random).
		var pos []string
		for _, id := range got {
			for i, c := range created {
				if c == id {
					pos = append(pos, fmt.Sprint(i))
				}
			}
		}
		return pos
	}
	if a, b := order(), order(); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different order: %v vs %v", a, b)
	}
}

func TestRunWebhooksDeliversInTheBackground(t *testing.T) {
	rc := &receiver{}
	s := newWebhookSim(t, rc)
	cust, pm := s.customer("pm_card_visa")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.srv.RunWebhooks(ctx, 5*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	if _, err := s.charge(cust, pm, "k", 1000); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(rc.received()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := rc.received(); len(got) != 1 || got[0].Type != eventPISucceeded {
		t.Fatalf("background delivery: got %d events", len(got))
	}
}

// TestAPIVersionMatchesStripeGo: events carry stripe-go's API version, or
// webhook.ConstructEvent rejects them; this fails when stripe-go moves on.
func TestAPIVersionMatchesStripeGo(t *testing.T) {
	if APIVersion != stripe.APIVersion {
		t.Fatalf("simulator speaks %s, stripe-go %s", APIVersion, stripe.APIVersion)
	}
}

func TestCanceledSweepKeepsEventPending(t *testing.T) {
	rc := &receiver{}
	s := newWebhookSim(t, rc)
	cust, pm := s.customer("pm_card_visa")
	s.charge(cust, pm, "k", 1000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.srv.DeliverWebhooks(ctx); err == nil {
		t.Fatal("want the context's error")
	}
	for _, rec := range s.srv.st.events {
		if rec.Delivery == deliveryPending && rec.Attempts != 0 {
			t.Fatalf("a canceled sweep counted an attempt: %+v", rec)
		}
	}
	if n, err := s.srv.DeliverWebhooks(context.Background()); n != 1 || err != nil || len(rc.received()) != 1 {
		t.Fatalf("next sweep: %d %v, received %d", n, err, len(rc.received()))
	}
}
