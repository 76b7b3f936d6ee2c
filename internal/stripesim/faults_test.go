package stripesim

import (
	"context"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func TestParseFaults(t *testing.T) {
	cases := []struct {
		name, spec string
		want       Faults
		wantErr    string
	}{
		{"empty", "", Faults{}, ""},
		{"fixed latency", "latency=20ms", Faults{Latency: Latency{Dist: "fixed", Min: 20 * time.Millisecond}}, ""},
		{"uniform latency", "latency=uniform:5ms:80ms", Faults{Latency: Latency{Dist: "uniform", Min: 5 * time.Millisecond, Max: 80 * time.Millisecond}}, ""},
		{"exp latency", "latency=exp:1ms:40ms", Faults{Latency: Latency{Dist: "exp", Min: time.Millisecond, Mean: 40 * time.Millisecond}}, ""},
		{"everything", "rate=25, concurrency=4,gateway-503=0.1,lock-timeout=0.2,500-before=0.3,500-after=0.4,drop-after=0.5,slow-commit=0.6:3s,webhook-dup=0.7,webhook-reorder=0.8,first=2",
			Faults{RateLimit: 25, ConcurrencyLimit: 4, Gateway503: 0.1, LockTimeout: 0.2, Error500Before: 0.3, Error500After: 0.4, DropAfter: 0.5,
				SlowCommit: 0.6, SlowCommitDelay: 3 * time.Second, WebhookDuplicate: 0.7, WebhookReorder: 0.8, FirstAttempts: 2}, ""},
		{"slow commit default delay", "slow-commit=1", Faults{SlowCommit: 1, SlowCommitDelay: defaultSlowCommitDelay}, ""},
		{"every problem reported", "latency=fast,500-after=2,bogus=1,rate=-1", Faults{}, "latency=fast"},
		{"unknown name", "bogus=1", Faults{}, "unknown fault"},
		{"probability out of range", "500-after=1.5", Faults{}, "probability"},
		{"missing value", "drop-after", Faults{}, "want name=value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFaults(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			again, err := ParseFaults(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("String round trip: %q gives %+v, %v", got.String(), again, err)
			}
		})
	}
	_, err := ParseFaults("latency=fast,500-after=2,bogus=1,rate=-1")
	for _, want := range []string{"latency=fast", "500-after=2", "bogus=1", "rate=-1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestFaultDecisionsAreSeeded(t *testing.T) {
	f := Faults{Latency: Latency{Dist: "uniform", Max: time.Second}, Error500After: 0.5, DropAfter: 0.5}
	draw := func(seed int64) []decision {
		var out []decision
		for i := range 50 {
			out = append(out, f.decide(seed, "key "+string(rune('a'+i%26)), 1+i/26))
		}
		return out
	}
	if !reflect.DeepEqual(draw(7), draw(7)) {
		t.Fatal("same seed, different faults")
	}
	if reflect.DeepEqual(draw(7), draw(8)) {
		t.Fatal("different seeds, same faults")
	}
	hits := 0
	for _, d := range draw(7) {
		if d.err500After {
			hits++
		}
	}
	if hits < 10 || hits > 40 {
		t.Fatalf("500-after=0.5 hit %d of 50", hits)
	}
	limited := f
	limited.FirstAttempts = 1
	if d := limited.decide(7, "key x", 2); d.err500After || d.dropAfter {
		t.Fatal("first=1 still faulted the second attempt")
	}
}

// TestF9_ResponseDroppedAfterCommit: the payment happens, the answer is lost;
// the retry with the same key replays the same payment.
func TestF9_ResponseDroppedAfterCommit(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("drop-after=1,first=1")
	// No keep-alive: Go's transport silently resends a request that carries
	// an Idempotency-Key when a reused connection dies, which would hide the drop.
	client := s.newClient(0, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
	_, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k-drop", 3000))
	if err == nil {
		t.Fatal("want a connection error")
	}
	if led := s.ledger(); len(led) != 1 {
		t.Fatalf("want the payment committed before the drop, ledger %d", len(led))
	}
	pi, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k-drop", 3000))
	if err != nil {
		t.Fatal(err)
	}
	if pi.ID != s.ledger()[0].PaymentIntentID || pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: got %s, want replay of %s", pi.ID, s.ledger()[0].PaymentIntentID)
	}
	if len(s.ledger()) != 1 {
		t.Fatal("retry charged again")
	}
}

// TestF9_SDKRetriesDroppedConnection: with stripe-go's own retries the drop is
// invisible to the caller, and still one payment.
func TestF9_SDKRetriesDroppedConnection(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("drop-after=1,first=1")
	client := s.newClient(1, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
	pi, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k-sdk", 3000))
	if err != nil {
		t.Fatal(err)
	}
	if s.countRequests("k-sdk") != 2 || len(s.ledger()) != 1 || pi.ID != s.ledger()[0].PaymentIntentID {
		t.Fatalf("want 2 attempts and 1 payment, got %d and %d", s.countRequests("k-sdk"), len(s.ledger()))
	}
}

// TestF12_SDKDoesNotRetryJSON500: a JSON 500 after commit comes back at once
// even with SDK retries on, and its key replays the 500: only a list by
// customer tells the truth.
func TestF12_SDKDoesNotRetryJSON500(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("500-after=1,first=1")
	client := s.newClient(2, nil)
	_, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k500", 3000))
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 500 || se.Type != stripe.ErrorTypeAPI {
		t.Fatalf("got %d %s", se.HTTPStatusCode, se.Type)
	}
	if n := s.countRequests("k500"); n != 1 {
		t.Fatalf("stripe-go retried a JSON 500: %d attempts", n)
	}
	if len(s.ledger()) != 1 {
		t.Fatal("500-after must commit the payment")
	}
	_, err = client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k500", 3000))
	se = stripeErr(t, err)
	if se.HTTPStatusCode != 500 || se.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: want the stored 500 replayed, got %d", se.HTTPStatusCode)
	}
	s.setFaults("") // the reconciling list is not the scenario
	var succeeded int
	for pi, err := range client.V1PaymentIntents.List(context.Background(), &stripe.PaymentIntentListParams{Customer: stripe.String(cust)}) {
		if err != nil {
			t.Fatal(err)
		}
		if pi.Status == stripe.PaymentIntentStatusSucceeded {
			succeeded++
		}
	}
	if succeeded != 1 {
		t.Fatalf("list: want the one succeeded payment, got %d", succeeded)
	}
}

func TestError500BeforeCommitChangesNothing(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("500-before=1,first=1")
	_, err := s.charge(cust, pm, "k", 3000)
	if se := stripeErr(t, err); se.HTTPStatusCode != 500 {
		t.Fatalf("got %d", se.HTTPStatusCode)
	}
	if len(s.ledger()) != 0 || len(s.srv.st.pis) != 0 {
		t.Fatal("500-before created something")
	}
	// Stripe stores the 500 under the key; a new key goes through.
	if _, err := s.charge(cust, pm, "k", 3000); err == nil {
		t.Fatal("want the stored 500 replayed")
	}
	s.setFaults("")
	if _, err := s.charge(cust, pm, "k2", 3000); err != nil || len(s.ledger()) != 1 {
		t.Fatalf("new key: %v, ledger %d", err, len(s.ledger()))
	}
}

// TestF12_SDKRetriesOnlyWhatItShould: stripe-go retries a non-JSON 503 and a
// 429 lock_timeout with the same key, but not a 409 idempotency_key_in_use.
func TestF12_SDKRetriesOnlyWhatItShould(t *testing.T) {
	for _, spec := range []string{"gateway-503=1,first=1", "lock-timeout=1,first=1"} {
		t.Run(spec, func(t *testing.T) {
			s := newSim(t)
			cust, pm := s.customer("pm_card_visa")
			s.setFaults(spec)
			client := s.newClient(1, nil)
			if _, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k", 3000)); err != nil {
				t.Fatal(err)
			}
			if n := s.countRequests("k"); n != 2 || len(s.ledger()) != 1 {
				t.Fatalf("want 2 attempts and 1 payment, got %d and %d", n, len(s.ledger()))
			}
		})
	}
	t.Run("409 in use", func(t *testing.T) {
		s := newSim(t)
		cust, pm := s.customer("pm_card_visa")
		s.setFaults("slow-commit=1:300ms,first=1")
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.charge(cust, pm, "k", 3000)
		}()
		s.waitInFlight("k")
		client := s.newClient(2, nil)
		_, err := client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, "k", 3000))
		se := stripeErr(t, err)
		if se.HTTPStatusCode != 409 || se.Code != stripe.ErrorCodeIdempotencyKeyInUse {
			t.Fatalf("got %d %s", se.HTTPStatusCode, se.Code)
		}
		<-done
		if n := s.countRequests("k"); n != 2 {
			t.Fatalf("stripe-go retried the 409: %d requests for the key", n)
		}
	})
}

// TestF15_RateLimit: over the configured rate, 429 with the limiter's reason;
// nothing is stored under the key, so a later retry goes through.
func TestF15_RateLimit(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("rate=2")
	for _, key := range []string{"k1", "k2"} {
		if _, err := s.charge(cust, pm, key, 1000); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.charge(cust, pm, "k3", 1000)
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 429 || se.Code != stripe.ErrorCodeRateLimit || se.LastResponse.Header.Get("Stripe-Rate-Limited-Reason") != "global-rate" {
		t.Fatalf("got %d %s reason=%q", se.HTTPStatusCode, se.Code, se.LastResponse.Header.Get("Stripe-Rate-Limited-Reason"))
	}
	s.clock.Advance(time.Second / 2)
	pi, err := s.charge(cust, pm, "k3", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if pi.LastResponse.Header.Get("Idempotent-Replayed") != "" || len(s.ledger()) != 3 {
		t.Fatal("a rate-limited request must not be stored under its key")
	}
}

// TestF15_ConcurrencyLimit: a request over the concurrency limit gets 429
// global-concurrency while another is still being handled.
func TestF15_ConcurrencyLimit(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("concurrency=1,slow-commit=1:300ms,first=1")
	done := make(chan error, 1)
	go func() {
		_, err := s.charge(cust, pm, "slow", 1000)
		done <- err
	}()
	s.waitInFlight("slow")
	_, err := s.charge(cust, pm, "other", 1000)
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 429 || se.LastResponse.Header.Get("Stripe-Rate-Limited-Reason") != "global-concurrency" {
		t.Fatalf("got %d reason=%q", se.HTTPStatusCode, se.LastResponse.Header.Get("Stripe-Rate-Limited-Reason"))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.charge(cust, pm, "other", 1000); err != nil {
		t.Fatalf("after the slow request: %v", err)
	}
	if n := len(s.ledger()); n != 2 {
		t.Fatalf("ledger %d, want 2", n)
	}
}

func TestLatencyIsAdded(t *testing.T) {
	s := newSim(t)
	s.setFaults("latency=40ms")
	start := time.Now()
	if _, err := s.client.V1Customers.Create(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("request took %v, want at least 40ms", el)
	}
}

// TestF12_ScenarioIsReproducible runs the same faulty scenario twice with the
// same seed and gets the same faults on the same requests.
func TestF12_ScenarioIsReproducible(t *testing.T) {
	run := func() []string {
		s := newSim(t)
		cust, pm := s.customer("pm_card_visa")
		s.setFaults("500-after=0.3,drop-after=0.3,gateway-503=0.2")
		client := s.newClient(0, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
		var out []string
		for i := range 12 {
			key := "k" + string(rune('a'+i))
			client.V1PaymentIntents.Create(context.Background(), chargeParams(cust, pm, key, 1000))
		}
		for _, r := range s.srv.Requests() {
			if r.IdempotencyKey != "" && !r.SDKGeneratedKey {
				out = append(out, r.IdempotencyKey+":"+r.Fault)
			}
		}
		// A dropped request is logged after its connection closes, possibly
		// after the next one: compare the scenario, not the log order.
		sort.Strings(out)
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different scenario:\n%v\n%v", a, b)
	}
	faulted := 0
	for _, x := range a {
		if !strings.HasSuffix(x, ":") {
			faulted++
		}
	}
	if faulted == 0 || faulted == len(a) {
		t.Fatalf("want some but not all requests faulted: %v", a)
	}
}

// TestF12_TransportResendsOnReusedConnection: with keep-alive, Go's transport
// resends a keyed request whose reused connection dropped, below stripe-go
// (which has its retries off here): a hidden retry layer, same key, one payment.
func TestF12_TransportResendsOnReusedConnection(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa") // leaves an idle keep-alive connection
	s.setFaults("drop-after=1,first=1")
	pi, err := s.charge(cust, pm, "k-reused", 3000)
	if err != nil {
		t.Fatalf("want the transport's resend to hide the drop, got %v", err)
	}
	if n := s.countRequests("k-reused"); n != 2 || len(s.ledger()) != 1 || pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("want 2 attempts, 1 payment, a replay: got %d, %d, %q", n, len(s.ledger()), pi.LastResponse.Header.Get("Idempotent-Replayed"))
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"zero value", Config{}, nil},
		{"everything wrong", Config{
			Faults:      Faults{DropAfter: 2, Error500After: -1, RateLimit: -3, Latency: Latency{Dist: "gamma"}},
			SearchDelay: -time.Second, WebhookURL: "ftp://x", WebhookRetries: []time.Duration{-1},
		}, []string{"DropAfter=2", "Error500After=-1", "RateLimit=-3", `Latency.Dist="gamma"`, "SearchDelay", "WebhookURL", "WebhookSecret", "WebhookRetries"}},
		{"uniform upside down", Config{Faults: Faults{Latency: Latency{Dist: "uniform", Min: time.Second}}}, []string{"Max must not be below Min"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	s := newSim(t)
	s.setFaults("drop-after=0.5")
	if err := s.srv.SetFaults(Faults{DropAfter: 1.5}); err == nil {
		t.Fatal("SetFaults took an invalid probability")
	}
	if got := s.srv.faults.DropAfter; got != 0.5 {
		t.Fatalf("invalid faults replaced the old ones: %v", got)
	}
}
