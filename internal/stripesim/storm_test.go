package stripesim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// TestF15_FaultStormOnePaymentPerKey bills 200 customers through every fault
// at once with a client that does what billrun must: one stable key per
// customer, retries on anything transient, and a list by customer when a 500
// leaves the outcome unknown. The ledger must hold exactly one payment each.
func TestF15_FaultStormOnePaymentPerKey(t *testing.T) {
	const customers, workers = 200, 10
	s := newSim(t)
	ctx := context.Background()
	// Keys come from billrun's own customer numbers, not Stripe's random ids,
	// so the seed replays the same storm.
	type cust struct {
		n      int
		id, pm string
	}
	all := make([]cust, customers)
	for i := range all {
		all[i].n = i
		all[i].id, all[i].pm = s.customer("pm_card_visa")
	}
	s.setFaults("rate=50,concurrency=8,gateway-503=0.1,lock-timeout=0.1,500-before=0.05,500-after=0.05," +
		"drop-after=0.1,slow-commit=0.05:20ms,latency=uniform:0ms:2ms")

	// paidFor lists the customer's PaymentIntents; complete is false when the
	// list itself failed, so "not paid" is only believed from a whole list.
	paidFor := func(c cust) (id string, complete bool) {
		for pi, err := range s.client.V1PaymentIntents.List(ctx, &stripe.PaymentIntentListParams{Customer: stripe.String(c.id)}) {
			if err != nil {
				return "", false
			}
			if pi.Status == stripe.PaymentIntentStatusSucceeded {
				return pi.ID, true
			}
		}
		return "", true
	}
	charge := func(c cust) (string, error) {
		key := fmt.Sprintf("2026-10/c%03d", c.n)
		for attempt := 1; attempt <= 100; attempt++ {
			pi, err := s.charge(c.id, c.pm, key, 1000)
			if err == nil {
				return pi.ID, nil
			}
			var se *stripe.Error
			switch {
			case errors.As(err, &se) && se.HTTPStatusCode == 500:
				// Indeterminate, and the 500 is stored under the key: the
				// list is the truth, and only a whole list that shows no
				// payment allows a new key. (Waiting out the 24 h instead
				// would expire every other in-flight key too: the double
				// charges F11 is about.)
				if id, complete := paidFor(c); id != "" {
					return id, nil
				} else if complete {
					key = fmt.Sprintf("2026-10/c%03d/after-500-%d", c.n, attempt)
				}
			case errors.As(err, &se) && se.HTTPStatusCode == 429:
				s.clock.Advance(100 * time.Millisecond) // wait for the limiter
			}
			time.Sleep(time.Millisecond)
		}
		return "", fmt.Errorf("%s: gave up", c.id)
	}

	var wg sync.WaitGroup
	work := make(chan cust)
	paid := make([]string, customers)
	var mu sync.Mutex
	var failures []error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				id, err := charge(c)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				}
				paid[c.n] = id
				mu.Unlock()
			}
		}()
	}
	for _, c := range all {
		work <- c
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d customers never charged, first: %v", len(failures), failures[0])
	}

	led := s.ledger()
	if d := Duplicates(led, func(p Payment) string { return p.Customer }); len(d) != 0 {
		t.Fatalf("I1 violated for %d customers", len(d))
	}
	if len(led) != customers {
		t.Fatalf("ledger has %d payments, want %d", len(led), customers)
	}
	byCustomer := map[string]string{}
	for _, p := range led {
		byCustomer[p.Customer] = p.PaymentIntentID
	}
	for _, c := range all {
		if paid[c.n] != byCustomer[c.id] {
			t.Fatalf("%s: the client believes %s, the ledger says %s", c.id, paid[c.n], byCustomer[c.id])
		}
	}
	faults := map[string]int{}
	for _, r := range s.srv.Requests() {
		if r.Fault != "" {
			faults[r.Fault]++
		}
	}
	for _, f := range []string{faultRateLimit, faultGateway503, faultLockTimeout, fault500Before, fault500After, faultDropAfter, faultSlowCommit} {
		if faults[f] == 0 {
			t.Errorf("the storm never injected %s: %v", f, faults)
		}
	}
	t.Logf("%d customers, %d requests, faults %v", customers, len(s.srv.Requests()), faults)
}
