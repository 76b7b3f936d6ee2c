package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"billrun.dev/billrun/internal/store"
)

// Bench measures a backend's write throughput, reported as writes/s:
// sequential one-write transactions, read-modify-write transactions (the
// shape of every charge-record update), the same from parallel goroutines on
// distinct documents, and one transaction of store.MaxWrites writes.
func Bench(b *testing.B, newBackend func(b *testing.B) store.Backend) {
	ctx := context.Background()
	b.Run("SequentialSet", func(b *testing.B) {
		db := newBackend(b)
		warmUp(b, db)
		i := 0
		for b.Loop() {
			i++
			if err := db.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
				return tx.Set(fmt.Sprintf("bench/d%d", i), store.Data{"n": int64(i), "state": "pending"})
			}); err != nil {
				b.Fatal(err)
			}
		}
		reportWrites(b, b.N)
	})
	b.Run("ReadModifyWrite", func(b *testing.B) {
		db := newBackend(b)
		warmUp(b, db)
		for b.Loop() {
			if err := incrementDoc(ctx, db, "bench/counter"); err != nil {
				b.Fatal(err)
			}
		}
		reportWrites(b, b.N)
	})
	b.Run("ParallelReadModifyWrite", func(b *testing.B) {
		db := newBackend(b)
		warmUp(b, db)
		b.ResetTimer()
		var worker atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			path := fmt.Sprintf("bench/counter%d", worker.Add(1))
			for pb.Next() {
				if err := incrementDoc(ctx, db, path); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportWrites(b, b.N)
	})
	b.Run("Batch500", func(b *testing.B) {
		db := newBackend(b)
		warmUp(b, db)
		round := 0
		for b.Loop() {
			round++
			if err := db.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
				for i := range store.MaxWrites {
					if err := tx.Set(fmt.Sprintf("bench/r%d-%d", round, i), store.Data{"n": int64(i)}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		reportWrites(b, b.N*store.MaxWrites)
	})
}

// warmUp makes one write before timing starts (b.Loop starts the clock at
// its first call): the emulator's first request is much slower than the rest.
func warmUp(b *testing.B, db store.Backend) {
	if err := incrementDoc(context.Background(), db, "bench/warm-up"); err != nil {
		b.Fatal(err)
	}
}

func incrementDoc(ctx context.Context, db store.Backend, path string) error {
	return db.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		var n int64
		doc, err := tx.Get(ctx, path)
		switch {
		case err == nil:
			n = doc.Data["n"].(int64)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return tx.Set(path, store.Data{"n": n + 1})
	})
}

func reportWrites(b *testing.B, writes int) {
	b.ReportMetric(float64(writes)/b.Elapsed().Seconds(), "writes/s")
}
