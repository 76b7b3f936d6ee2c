// Package faultstore wraps a store.Backend and makes chosen operations fail, to
// reproduce failures such as F1 ("a store write fails after a successful
// charge") in tests, and behind `billrun --faults`.
//
// A plan is a comma-separated list of rules, parsed by Parse:
//
//	seed=42,commit_fail=charges:0.2,commit_lost=runs@2,read_fail=customers/cus_7
//
// Each rule is KIND=TARGET, optionally followed by :P (fail with probability P,
// 0 < P <= 1) or @N (fail only the Nth matching operation, counting from 1);
// with neither, every matching operation fails. Kinds:
//
//	commit_fail  a transaction writing a matching document fails before it
//	             commits: nothing is written, the caller gets ErrUnavailable.
//	commit_lost  the transaction commits, but the caller is told it failed
//	             (ErrUnavailable), as when a reply is lost after the write.
//	read_fail    a Get of a matching document, or a Query of a matching
//	             collection (inside a transaction or not), fails with
//	             ErrUnavailable.
//
// TARGET is "*" (everything), a collection id without a slash ("charges"
// matches runs/2026-10/charges/cus_1), or a path prefix with a slash
// ("runs/2026-10" matches that document and everything under it).
//
// Decisions are deterministic given the seed (default 1): a probabilistic rule
// decides from a hash of the seed, the rule, the document path and how many
// times that rule has met that path, so the same run fails the same customers
// however goroutines interleave. Every injected error wraps both ErrInjected
// and store.ErrUnavailable.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"billrun.dev/billrun/internal/store"
)

// ErrInjected marks an error made by this package, not by the backend.
var ErrInjected = errors.New("faultstore: injected fault")

// Kind is what a rule breaks.
type Kind string

// The kinds of fault.
const (
	CommitFail Kind = "commit_fail"
	CommitLost Kind = "commit_lost"
	ReadFail   Kind = "read_fail"
)

// Rule is one fault. Exactly one of Prob and Nth is set.
type Rule struct {
	Kind   Kind
	Target string
	// Prob is the probability that a matching operation fails.
	Prob float64
	// Nth, when not 0, fails only the Nth matching operation (from 1).
	Nth int
}

func (r Rule) String() string {
	s := string(r.Kind) + "=" + r.Target
	switch {
	case r.Nth > 0:
		s += "@" + strconv.Itoa(r.Nth)
	case r.Prob < 1:
		s += ":" + strconv.FormatFloat(r.Prob, 'g', -1, 64)
	}
	return s
}

// matches reports whether a document or collection path is a target.
func (r Rule) matches(path string) bool {
	switch {
	case r.Target == "*":
		return true
	case strings.Contains(r.Target, "/"):
		return path == r.Target || strings.HasPrefix(path, r.Target+"/")
	}
	// Collection ids are the even-numbered path elements.
	for i, seg := range strings.Split(path, "/") {
		if i%2 == 0 && seg == r.Target {
			return true
		}
	}
	return false
}

// Plan is a parsed fault specification.
type Plan struct {
	Seed  uint64
	Rules []Rule
}

func (p Plan) String() string {
	parts := []string{"seed=" + strconv.FormatUint(p.Seed, 10)}
	for _, r := range p.Rules {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

// Parse reads a plan in the syntax of the package documentation. An empty
// spec is an empty plan.
func Parse(spec string) (Plan, error) {
	plan := Plan{Seed: 1}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok || val == "" {
			return Plan{}, fmt.Errorf("faultstore: parse %q: want KIND=TARGET[:P|@N] or seed=N", item)
		}
		if key == "seed" {
			seed, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return Plan{}, fmt.Errorf("faultstore: parse %q: bad seed: %w", item, err)
			}
			plan.Seed = seed
			continue
		}
		r, err := parseRule(Kind(key), val)
		if err != nil {
			return Plan{}, fmt.Errorf("faultstore: parse %q: %w", item, err)
		}
		plan.Rules = append(plan.Rules, r)
	}
	return plan, nil
}

func parseRule(kind Kind, val string) (Rule, error) {
	switch kind {
	case CommitFail, CommitLost, ReadFail:
	default:
		return Rule{}, fmt.Errorf("unknown kind %q (want %s, %s or %s)", kind, CommitFail, CommitLost, ReadFail)
	}
	r := Rule{Kind: kind, Target: val, Prob: 1}
	if target, p, ok := strings.Cut(val, ":"); ok {
		prob, err := strconv.ParseFloat(p, 64)
		if err != nil || !(prob > 0 && prob <= 1) {
			return Rule{}, fmt.Errorf("probability %q is not in (0, 1]", p)
		}
		r.Target, r.Prob = target, prob
	} else if target, n, ok := strings.Cut(val, "@"); ok {
		nth, err := strconv.Atoi(n)
		if err != nil || nth < 1 {
			return Rule{}, fmt.Errorf("occurrence %q is not a positive integer", n)
		}
		r.Target, r.Nth = target, nth
	}
	if r.Target == "" || strings.HasPrefix(r.Target, "/") || strings.HasSuffix(r.Target, "/") {
		return Rule{}, fmt.Errorf("bad target %q", r.Target)
	}
	return r, nil
}

// Injection records one injected fault.
type Injection struct {
	Rule Rule
	Path string
}

// Store is a Backend that injects the faults of a plan into another.
type Store struct {
	inner store.Backend
	plan  Plan

	mu sync.Mutex
	// matched counts matching operations per rule (for Nth rules) and per
	// rule and path (for the hash of probabilistic rules).
	matched  map[int]int
	perPath  map[ruleKey]uint64
	injected []Injection
}

type ruleKey struct {
	rule int
	path string
}

var _ store.Backend = (*Store)(nil)

// New wraps inner. Closing the Store closes inner.
func New(inner store.Backend, plan Plan) *Store {
	return &Store{inner: inner, plan: plan, matched: map[int]int{}, perPath: map[ruleKey]uint64{}}
}

// Injected lists the faults injected so far, in order.
func (s *Store) Injected() []Injection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Injection(nil), s.injected...)
}

// fault decides whether an operation of kind on paths fails, and returns the
// injected error if so. The first rule of that kind matching one of the paths
// decides, on the first path it matches.
func (s *Store) fault(kind Kind, op string, paths ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.plan.Rules {
		if r.Kind != kind {
			continue
		}
		for _, p := range paths {
			if !r.matches(p) {
				continue
			}
			s.matched[i]++
			k := ruleKey{i, p}
			s.perPath[k]++
			var fire bool
			if r.Nth > 0 {
				fire = s.matched[i] == r.Nth
			} else {
				fire = chance(s.plan.Seed, i, p, s.perPath[k]) < r.Prob
			}
			if !fire {
				return nil
			}
			s.injected = append(s.injected, Injection{Rule: r, Path: p})
			return fmt.Errorf("%s %s: %w (%s): %w", op, p, ErrInjected, r, store.ErrUnavailable)
		}
	}
	return nil
}

// chance maps (seed, rule, path, occurrence) to a uniform number in [0, 1).
func chance(seed uint64, rule int, path string, n uint64) float64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	x := seed ^ h.Sum64() ^ uint64(rule)<<56 ^ n*0x9e3779b97f4a7c15
	// splitmix64 finaliser: spreads nearby inputs over the whole range.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// Get reads a document unless a read_fail rule says otherwise.
func (s *Store) Get(ctx context.Context, path string) (store.Doc, error) {
	if err := s.fault(ReadFail, "faultstore: get", path); err != nil {
		return store.Doc{}, err
	}
	return s.inner.Get(ctx, path)
}

// Query runs a query unless a read_fail rule says otherwise.
func (s *Store) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := s.fault(ReadFail, "faultstore: query", q.Collection); err != nil {
		return nil, err
	}
	return s.inner.Query(ctx, q)
}

// Aggregate is never faulted: it is how tests and operators check totals.
func (s *Store) Aggregate(ctx context.Context, q store.Query, sumFields ...string) (store.Aggregate, error) {
	return s.inner.Aggregate(ctx, q, sumFields...)
}

// Close closes the wrapped backend.
func (s *Store) Close() error { return s.inner.Close() }

// RunTransaction runs fn on the wrapped backend, failing the commit before it
// happens (commit_fail) or after it happened (commit_lost) when a rule says so.
func (s *Store) RunTransaction(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	var written []string
	err := s.inner.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		ftx := &txn{Tx: tx, s: s}
		if err := fn(ctx, ftx); err != nil {
			return err
		}
		written = ftx.written
		// Returning an error from fn makes the backend roll back: nothing is written.
		return s.fault(CommitFail, "faultstore: commit", ftx.written...)
	})
	if err != nil {
		return err
	}
	return s.fault(CommitLost, "faultstore: commit reply lost", written...)
}

// txn records the paths a transaction writes and faults its reads.
type txn struct {
	store.Tx
	s       *Store
	written []string
}

func (t *txn) Get(ctx context.Context, path string) (store.Doc, error) {
	if err := t.s.fault(ReadFail, "faultstore: tx get", path); err != nil {
		return store.Doc{}, err
	}
	return t.Tx.Get(ctx, path)
}

func (t *txn) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := t.s.fault(ReadFail, "faultstore: tx query", q.Collection); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, q)
}

func (t *txn) Create(path string, data store.Data) error {
	t.written = append(t.written, path)
	return t.Tx.Create(path, data)
}

func (t *txn) Set(path string, data store.Data) error {
	t.written = append(t.written, path)
	return t.Tx.Set(path, data)
}

func (t *txn) Update(path string, fields store.Data) error {
	t.written = append(t.written, path)
	return t.Tx.Update(path, fields)
}

func (t *txn) Delete(path string) error {
	t.written = append(t.written, path)
	return t.Tx.Delete(path)
}
