// Package storetest is the contract every store.Backend must meet: one suite,
// run against the embedded store and against Firestore (through its emulator),
// so domain logic written on store.Backend behaves the same on both.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store"
)

// Run runs the contract suite. newBackend must return an empty backend (a fresh
// file, or a reset emulator); it is called once per subtest, and the subtests
// run one after another.
func Run(t *testing.T, newBackend func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b store.Backend)
	}{
		{"RoundTripTypes", testRoundTripTypes},
		{"GetMissing", testGetMissing},
		{"CreateExisting", testCreateExisting},
		{"UpdateMergesTopLevel", testUpdateMergesTopLevel},
		{"UpdateMissing", testUpdateMissing},
		{"SetReplaces", testSetReplaces},
		{"Delete", testDelete},
		{"ReadAfterWrite", testReadAfterWrite},
		{"TooManyWrites", testTooManyWrites},
		{"FnErrorAbortsAll", testFnErrorAbortsAll},
		{"InvalidRequests", testInvalidRequests},
		{"NestedTransaction", testNestedTransaction},
		{"Queries", testQueries},
		{"QueryInTransaction", testQueryInTransaction},
		{"Paging", testPaging},
		{"Subcollections", testSubcollections},
		{"Aggregate", testAggregate},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"TwoWritersOneRecord", testTwoWritersOneRecord},
		{"ConcurrentCreate", testConcurrentCreate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
		})
	}
}

func set(t *testing.T, b store.Backend, path string, data store.Data) {
	t.Helper()
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.Set(path, data)
	})
	if err != nil {
		t.Fatalf("set %s: %v", path, err)
	}
}

func mustGet(t *testing.T, b store.Backend, path string) store.Doc {
	t.Helper()
	doc, err := b.Get(t.Context(), path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return doc
}

func wantMissing(t *testing.T, b store.Backend, path string) {
	t.Helper()
	if _, err := b.Get(t.Context(), path); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get %s: err = %v, want ErrNotFound", path, err)
	}
}

func testRoundTripTypes(t *testing.T, b store.Backend) {
	local := time.FixedZone("UTC+2", 2*3600)
	at := time.Date(2026, 10, 31, 23, 59, 58, 123456789, local)
	tests := []struct {
		name string
		in   any
		want any // the value read back; nil means "same as in"
	}{
		{"null", nil, nil},
		{"true", true, nil},
		{"false", false, nil},
		{"int64 zero", int64(0), nil},
		{"int64 above 2^53", int64(1<<53 + 1), nil},
		{"int64 max", int64(math.MaxInt64), nil},
		{"int64 min", int64(math.MinInt64), nil},
		{"float64", 0.1, nil},
		{"float64 integral", 3.0, nil},
		{"float64 negative tiny", -5e-324, nil},
		{"float64 inf", math.Inf(1), nil},
		{"float64 nan", math.NaN(), nil},
		{"string", "héllo, 世界 \"quoted\" \\ i123", nil},
		{"string empty", "", nil},
		{"string looking like a tag", "i42", nil},
		{"bytes", []byte{0, 1, 2, 255}, nil},
		{"bytes empty", []byte{}, nil},
		{"time truncated to µs in UTC", at, at.UTC().Truncate(time.Microsecond)},
		{"list mixed", []any{int64(1), "two", 3.5, nil, true, map[string]any{"k": int64(5)}}, nil},
		{"list empty", []any{}, nil},
		{"map empty", map[string]any{}, nil},
		{"map nested", map[string]any{"a": map[string]any{"b": map[string]any{"c": int64(-7)}}, "d": []any{"x"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			set(t, b, "types/doc", store.Data{"v": tc.in})
			doc := mustGet(t, b, "types/doc")
			got, ok := doc.Data["v"]
			if !ok {
				t.Fatalf("field v missing from %v", doc.Data)
			}
			if !sameValue(got, want) {
				t.Errorf("read back %#v (%T), want %#v (%T)", got, got, want, want)
			}
			if doc.Path != "types/doc" || doc.ID() != "doc" {
				t.Errorf("path %q id %q, want types/doc, doc", doc.Path, doc.ID())
			}
			if doc.UpdateTime.IsZero() {
				t.Error("UpdateTime is zero")
			}
		})
	}
}

// sameValue is reflect.DeepEqual that also treats NaN as equal to NaN.
func sameValue(a, b any) bool {
	fa, okA := a.(float64)
	fb, okB := b.(float64)
	if okA && okB && math.IsNaN(fa) && math.IsNaN(fb) {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func testGetMissing(t *testing.T, b store.Backend) {
	wantMissing(t, b, "customers/nobody")
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		_, err := tx.Get(ctx, "customers/nobody")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tx get: err = %v, want ErrNotFound", err)
	}
}

func testCreateExisting(t *testing.T, b store.Backend) {
	set(t, b, "c/one", store.Data{"v": int64(1)})
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.Set("c/other", store.Data{"v": int64(2)}); err != nil {
			return err
		}
		return tx.Create("c/one", store.Data{"v": int64(3)})
	})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("create existing: err = %v, want ErrAlreadyExists", err)
	}
	if v := mustGet(t, b, "c/one").Data["v"]; v != int64(1) {
		t.Errorf("c/one v = %v, want 1 (unchanged)", v)
	}
	wantMissing(t, b, "c/other")
	err = b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.Create("c/new", store.Data{"v": int64(4)})
	})
	if err != nil {
		t.Fatalf("create new: %v", err)
	}
	if v := mustGet(t, b, "c/new").Data["v"]; v != int64(4) {
		t.Errorf("c/new v = %v, want 4", v)
	}
}

func testUpdateMergesTopLevel(t *testing.T, b store.Backend) {
	set(t, b, "u/doc", store.Data{"keep": "k", "n": int64(1), "m": map[string]any{"a": int64(1), "b": int64(2)}})
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.Update("u/doc", store.Data{"n": int64(2), "m": map[string]any{"c": int64(3)}, "dotted.key": "d"})
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	want := store.Data{"keep": "k", "n": int64(2), "m": map[string]any{"c": int64(3)}, "dotted.key": "d"}
	if got := mustGet(t, b, "u/doc").Data; !reflect.DeepEqual(got, want) {
		t.Errorf("after update: %v, want %v", got, want)
	}
}

func testUpdateMissing(t *testing.T, b store.Backend) {
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.Set("u/side", store.Data{"v": int64(1)}); err != nil {
			return err
		}
		return tx.Update("u/missing", store.Data{"v": int64(1)})
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update missing: err = %v, want ErrNotFound", err)
	}
	wantMissing(t, b, "u/missing")
	wantMissing(t, b, "u/side")
}

func testSetReplaces(t *testing.T, b store.Backend) {
	set(t, b, "s/doc", store.Data{"a": int64(1), "b": int64(2)})
	set(t, b, "s/doc", store.Data{"c": int64(3)})
	if got, want := mustGet(t, b, "s/doc").Data, (store.Data{"c": int64(3)}); !reflect.DeepEqual(got, want) {
		t.Errorf("after second set: %v, want %v", got, want)
	}
}

func testDelete(t *testing.T, b store.Backend) {
	set(t, b, "d/doc", store.Data{"a": int64(1)})
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.Delete("d/doc"); err != nil {
			return err
		}
		return tx.Delete("d/never-existed")
	})
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantMissing(t, b, "d/doc")
}

func testReadAfterWrite(t *testing.T, b store.Backend) {
	tests := []struct {
		name string
		read func(ctx context.Context, tx store.Tx) error
	}{
		{"get", func(ctx context.Context, tx store.Tx) error {
			_, err := tx.Get(ctx, "r/doc")
			return err
		}},
		{"query", func(ctx context.Context, tx store.Tx) error {
			_, err := tx.Query(ctx, store.Query{Collection: "r"})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var readErr error
			err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
				if err := tx.Set("r/doc", store.Data{"v": int64(1)}); err != nil {
					return err
				}
				readErr = tc.read(ctx, tx)
				return nil // ignoring the error must not let the transaction commit
			})
			if !errors.Is(readErr, store.ErrInvalid) {
				t.Errorf("read after write: err = %v, want ErrInvalid", readErr)
			}
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("transaction: err = %v, want ErrInvalid", err)
			}
			wantMissing(t, b, "r/doc")
		})
	}
}

func testTooManyWrites(t *testing.T, b store.Backend) {
	write := func(n int) error {
		return b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
			for i := range n {
				if err := tx.Set(fmt.Sprintf("w%d/d%03d", n, i), store.Data{"i": int64(i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := write(store.MaxWrites + 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("%d writes: err = %v, want ErrInvalid", store.MaxWrites+1, err)
	}
	wantMissing(t, b, fmt.Sprintf("w%d/d000", store.MaxWrites+1))
	if err := write(store.MaxWrites); err != nil {
		t.Fatalf("%d writes: %v", store.MaxWrites, err)
	}
	agg, err := b.Aggregate(t.Context(), store.Query{Collection: fmt.Sprintf("w%d", store.MaxWrites)})
	if err != nil || agg.Count != store.MaxWrites {
		t.Fatalf("after %d writes: count %d, err %v", store.MaxWrites, agg.Count, err)
	}
}

func testFnErrorAbortsAll(t *testing.T, b store.Backend) {
	set(t, b, "a/existing", store.Data{"v": int64(1)})
	boom := errors.New("boom")
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.Get(ctx, "a/existing"); err != nil {
			return err
		}
		if err := tx.Set("a/new", store.Data{"v": int64(2)}); err != nil {
			return err
		}
		if err := tx.Update("a/existing", store.Data{"v": int64(3)}); err != nil {
			return err
		}
		return fmt.Errorf("domain check failed: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the fn's error", err)
	}
	wantMissing(t, b, "a/new")
	if v := mustGet(t, b, "a/existing").Data["v"]; v != int64(1) {
		t.Errorf("a/existing v = %v, want 1", v)
	}
}

func testInvalidRequests(t *testing.T, b store.Backend) {
	tests := []struct {
		name string
		fn   func(ctx context.Context, tx store.Tx) error
	}{
		{"collection path as document", func(ctx context.Context, tx store.Tx) error {
			return tx.Set("runs/2026-10/charges", store.Data{})
		}},
		{"empty path element", func(ctx context.Context, tx store.Tx) error {
			return tx.Set("runs//x", store.Data{})
		}},
		{"Go int", func(ctx context.Context, tx store.Tx) error {
			return tx.Set("x/y", store.Data{"n": 1})
		}},
		{"list in list", func(ctx context.Context, tx store.Tx) error {
			return tx.Set("x/y", store.Data{"l": []any{[]any{int64(1)}}})
		}},
		{"empty field name", func(ctx context.Context, tx store.Tx) error {
			return tx.Set("x/y", store.Data{"": int64(1)})
		}},
		{"update naming no field", func(ctx context.Context, tx store.Tx) error {
			return tx.Update("x/y", store.Data{})
		}},
		{"struct", func(ctx context.Context, tx store.Tx) error {
			return tx.Update("x/y", store.Data{"s": struct{}{}})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opErr error
			err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
				opErr = tc.fn(ctx, tx)
				return nil
			})
			if !errors.Is(opErr, store.ErrInvalid) || !errors.Is(err, store.ErrInvalid) {
				t.Errorf("op err = %v, tx err = %v; want both ErrInvalid", opErr, err)
			}
		})
	}
	if _, err := b.Get(t.Context(), "customers"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("get collection path: err = %v, want ErrInvalid", err)
	}
}

// testNestedTransaction: a transaction started inside another is refused
// (it would deadlock on the embedded store, and Firestore's client refuses it),
// and the outer one writes nothing if it returns that error.
func testNestedTransaction(t *testing.T, b store.Backend) {
	var inner error
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		inner = b.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
			return tx.Set("n/inner", store.Data{})
		})
		if err := tx.Set("n/outer", store.Data{}); err != nil {
			return err
		}
		return inner
	})
	if !errors.Is(inner, store.ErrInvalid) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("inner err = %v, outer err = %v; want both ErrInvalid", inner, err)
	}
	wantMissing(t, b, "n/inner")
	wantMissing(t, b, "n/outer")
}
