package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"billrun.dev/billrun/internal/store"
)

// Sized for the Firestore emulator, which manages about 230 transactional
// writes per second on a 2-core machine with heavy retrying under contention.
const (
	workers       = 4
	incrementsPer = 8
	// conflictRetries bounds how often a test retries a transaction that ended
	// in ErrConflict, which the store documents as safe to retry.
	conflictRetries = 20
)

// retryConflicts runs a transaction, retrying it on ErrConflict as callers do.
func retryConflicts(ctx context.Context, b store.Backend, fn func(ctx context.Context, tx store.Tx) error) error {
	var err error
	for range conflictRetries {
		if err = b.RunTransaction(ctx, fn); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return err
}

// runWorkers runs fn(worker) on n goroutines and returns their errors.
func runWorkers(n int, fn func(worker int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { errs[w] = fn(w) })
	}
	wg.Wait()
	return errs
}

// testConcurrentIncrements: read-modify-write increments of one document from
// several goroutines must all count (no lost update).
func testConcurrentIncrements(t *testing.T, b store.Backend) {
	set(t, b, "counters/c", store.Data{"n": int64(0)})
	errs := runWorkers(workers, func(int) error {
		for range incrementsPer {
			err := retryConflicts(t.Context(), b, func(ctx context.Context, tx store.Tx) error {
				doc, err := tx.Get(ctx, "counters/c")
				if err != nil {
					return err
				}
				return tx.Update("counters/c", store.Data{"n": doc.Data["n"].(int64) + 1})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	for w, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", w, err)
		}
	}
	if got := mustGet(t, b, "counters/c").Data["n"]; got != int64(workers*incrementsPer) {
		t.Errorf("n = %v, want %d", got, workers*incrementsPer)
	}
}

// testTwoWritersOneRecord: writers race to claim one record (read it, claim it
// if unclaimed), as preflight claims a run; exactly one must win each round,
// and the record must name the winner.
func testTwoWritersOneRecord(t *testing.T, b store.Backend) {
	for round := range 3 {
		path := fmt.Sprintf("runs/round-%d", round)
		set(t, b, path, store.Data{"owner": ""})
		won := make([]bool, 2)
		errs := runWorkers(2, func(w int) error {
			return retryConflicts(t.Context(), b, func(ctx context.Context, tx store.Tx) error {
				won[w] = false // fn may run again after a conflict
				doc, err := tx.Get(ctx, path)
				if err != nil {
					return err
				}
				if doc.Data["owner"] != "" {
					return nil
				}
				won[w] = true
				return tx.Update(path, store.Data{"owner": fmt.Sprintf("writer-%d", w)})
			})
		})
		for w, err := range errs {
			if err != nil {
				t.Fatalf("round %d writer %d: %v", round, w, err)
			}
		}
		if won[0] == won[1] {
			t.Fatalf("round %d: winners %v, want exactly one", round, won)
		}
		winner := 0
		if won[1] {
			winner = 1
		}
		if got, want := mustGet(t, b, path).Data["owner"], fmt.Sprintf("writer-%d", winner); got != want {
			t.Errorf("round %d: owner %v, want %v", round, got, want)
		}
	}
}

// testConcurrentCreate: of several transactions creating the same document,
// exactly one succeeds and the others get ErrAlreadyExists.
func testConcurrentCreate(t *testing.T, b store.Backend) {
	errs := runWorkers(workers, func(w int) error {
		return retryConflicts(t.Context(), b, func(ctx context.Context, tx store.Tx) error {
			return tx.Create("charges/once", store.Data{"writer": int64(w)})
		})
	})
	created := 0
	for w, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, store.ErrAlreadyExists):
			t.Errorf("writer %d: %v, want nil or ErrAlreadyExists", w, err)
		}
	}
	if created != 1 {
		t.Errorf("%d creates succeeded, want 1", created)
	}
}
