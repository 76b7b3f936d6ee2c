package faultstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/storetest"
)

func newEmbedded(t *testing.T) store.Backend {
	t.Helper()
	db, err := embedded.Open(t.Context(), filepath.Join(t.TempDir(), "billrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestContractWithoutFaults: with an empty plan the wrapper is invisible.
func TestContractWithoutFaults(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		return New(newEmbedded(t), Plan{})
	})
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want Plan
	}{
		{"empty", "", Plan{Seed: 1}},
		{"probability", "commit_fail=charges:0.2", Plan{Seed: 1, Rules: []Rule{{Kind: CommitFail, Target: "charges", Prob: 0.2}}}},
		{"nth and seed", "seed=42, commit_lost=runs/2026-10@2", Plan{Seed: 42, Rules: []Rule{{Kind: CommitLost, Target: "runs/2026-10", Prob: 1, Nth: 2}}}},
		{"always", "read_fail=*", Plan{Seed: 1, Rules: []Rule{{Kind: ReadFail, Target: "*", Prob: 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.spec, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.spec, got, tc.want)
			}
			again, err := Parse(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("Parse(%q) = %+v, %v; want the same plan back", got.String(), again, err)
			}
		})
	}
	bad := []struct{ name, spec string }{
		{"unknown kind", "commit_slow=charges"},
		{"no target", "commit_fail="},
		{"no equals", "commit_fail"},
		{"probability zero", "commit_fail=charges:0"},
		{"probability above one", "commit_fail=charges:1.5"},
		{"probability not a number", "commit_fail=charges:often"},
		{"nth zero", "commit_fail=charges@0"},
		{"bad seed", "seed=-1"},
		{"trailing slash", "read_fail=runs/"},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.name, func(t *testing.T) {
			if p, err := Parse(tc.spec); err == nil {
				t.Errorf("Parse(%q) = %+v, want an error", tc.spec, p)
			}
		})
	}
}

func TestTargetMatching(t *testing.T) {
	tests := []struct {
		target, path string
		want         bool
	}{
		{"*", "customers/cus_1", true},
		{"charges", "runs/2026-10/charges/cus_1", true},
		{"charges", "runs/2026-10/charges", true},
		{"charges", "charges_old/x", false},
		{"cus_1", "runs/2026-10/charges/cus_1", false}, // a document id, not a collection
		{"runs/2026-10", "runs/2026-10", true},
		{"runs/2026-10", "runs/2026-10/charges/cus_1", true},
		{"runs/2026-10", "runs/2026-100", false},
	}
	for _, tc := range tests {
		t.Run(tc.target+" on "+tc.path, func(t *testing.T) {
			if got := (Rule{Target: tc.target}).matches(tc.path); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func set(ctx context.Context, b store.Backend, path string) error {
	return b.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.Set(path, store.Data{"v": int64(1)})
	})
}

func exists(t *testing.T, b store.Backend, path string) bool {
	t.Helper()
	_, err := b.Get(t.Context(), path)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get %s: %v", path, err)
	}
	return err == nil
}

func injected(err error) bool {
	return errors.Is(err, ErrInjected) && errors.Is(err, store.ErrUnavailable)
}

func TestCommitFailWritesNothing(t *testing.T) {
	inner := newEmbedded(t)
	s := New(inner, Plan{Rules: []Rule{{Kind: CommitFail, Target: "charges", Nth: 2}}})
	for i, want := range []bool{false, true, false} {
		path := fmt.Sprintf("runs/2026-10/charges/cus_%d", i)
		err := set(t.Context(), s, path)
		if injected(err) != want {
			t.Fatalf("commit %d: err = %v, want injected %v", i+1, err, want)
		}
		if got := exists(t, inner, path); got == want {
			t.Errorf("commit %d: document exists %v, want %v", i+1, got, !want)
		}
	}
	if err := set(t.Context(), s, "runs/2026-10"); err != nil {
		t.Errorf("write outside the target: %v", err)
	}
	if got := s.Injected(); len(got) != 1 || got[0].Path != "runs/2026-10/charges/cus_1" {
		t.Errorf("Injected() = %+v", got)
	}
}

func TestCommitLostWritesAnyway(t *testing.T) {
	inner := newEmbedded(t)
	s := New(inner, Plan{Rules: []Rule{{Kind: CommitLost, Target: "runs/2026-10/charges/cus_1", Prob: 1}}})
	if err := set(t.Context(), s, "runs/2026-10/charges/cus_1"); !injected(err) {
		t.Fatalf("err = %v, want an injected error", err)
	}
	if !exists(t, inner, "runs/2026-10/charges/cus_1") {
		t.Error("the commit whose reply was lost did not happen")
	}
}

func TestReadFail(t *testing.T) {
	inner := newEmbedded(t)
	for _, p := range []string{"customers/cus_7", "customers/cus_8"} {
		if err := set(t.Context(), inner, p); err != nil {
			t.Fatal(err)
		}
	}
	s := New(inner, Plan{Rules: []Rule{{Kind: ReadFail, Target: "customers/cus_7", Prob: 1}}})
	tests := []struct {
		name string
		read func(ctx context.Context) error
		want bool
	}{
		{"get target", func(ctx context.Context) error { _, err := s.Get(ctx, "customers/cus_7"); return err }, true},
		{"get other", func(ctx context.Context) error { _, err := s.Get(ctx, "customers/cus_8"); return err }, false},
		{"query collection", func(ctx context.Context) error {
			_, err := s.Query(ctx, store.Query{Collection: "customers"})
			return err
		}, false},
		{"get target in tx", func(ctx context.Context) error {
			return s.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
				_, err := tx.Get(ctx, "customers/cus_7")
				return err
			})
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read(t.Context())
			if injected(err) != tc.want || (!tc.want && err != nil) {
				t.Errorf("err = %v, want injected %v", err, tc.want)
			}
		})
	}
}

// TestProbabilityIsDeterministic: the same seed fails the same documents,
// whatever else happens; another seed fails others; the rate is about P.
func TestProbabilityIsDeterministic(t *testing.T) {
	const n, p = 400, 0.2
	failed := func(seed uint64) []string {
		s := New(nil, Plan{Seed: seed, Rules: []Rule{{Kind: CommitFail, Target: "charges", Prob: p}}})
		var out []string
		for i := range n {
			path := fmt.Sprintf("runs/2026-10/charges/cus_%d", i)
			if s.fault(CommitFail, "test", path) != nil {
				out = append(out, path)
			}
		}
		return out
	}
	a, b, c := failed(7), failed(7), failed(8)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed failed different documents")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 7 and 8 failed the same documents")
	}
	if got := float64(len(a)) / n; got < p/2 || got > p*2 {
		t.Errorf("failure rate %.2f, want about %.2f", got, p)
	}
}
