package billing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestKeyedLocks(t *testing.T) {
	var k keyedLocks
	ctx := context.Background()
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := k.lock(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once, want 1", most)
	}
	// Another key is independent; a waiter gives up with its context.
	unlockA, _ := k.lock(ctx, "a")
	unlockB, err := k.lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := k.lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting on a held key: %v", err)
	}
	unlockA()
	if len(k.held) != 0 {
		t.Errorf("locks left: %v", k.held)
	}
}
