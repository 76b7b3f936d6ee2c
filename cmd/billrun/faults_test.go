package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store/faultstore"
	"billrun.dev/billrun/internal/stripesim"
)

// TestParseFaults: one --faults spec is split between the simulator and the
// store by each item's key; the store is seeded by --seed unless the spec
// says otherwise; every bad item of either part is reported at once.
func TestParseFaults(t *testing.T) {
	const seed = 5 // --seed
	cases := []struct {
		name  string
		spec  string
		sim   stripesim.Faults
		store string // the store's plan (Plan.String), seeded
		rules int
		// errs are fragments of the error; none means no error.
		errs []string
	}{
		{"empty", "", stripesim.Faults{}, "seed=5", 0, nil},
		{"simulator only", "latency=20ms, first=1", stripesim.Faults{Latency: stripesim.Latency{Dist: "fixed", Min: 20 * time.Millisecond}, FirstAttempts: 1}, "seed=5", 0, nil},
		{"store only, seeded by --seed", "commit_fail=charges:0.2", stripesim.Faults{}, "seed=5,commit_fail=charges:0.2", 1, nil},
		{"mixed, the spec's seed wins", "gateway-503=0.05,commit_lost=runs/2026-10/charges/c1@3,seed=9,read_fail=customers",
			stripesim.Faults{Gateway503: 0.05}, "seed=9,commit_lost=runs/2026-10/charges/c1@3,read_fail=customers", 2, nil},
		{"bad store probability", "commit_fail=charges:2,latency=1ms", stripesim.Faults{}, "", 0,
			[]string{`faultstore: parse "commit_fail=charges:2": probability "2" is not in (0, 1]`}},
		{"unknown simulator fault", "commit_lost=charges,bogus=1", stripesim.Faults{}, "", 0, []string{"stripesim: parse faults: bogus=1: unknown fault"}},
		{"both parts bad at once", "read_fail=/runs,500-after=2", stripesim.Faults{}, "", 0,
			[]string{`faultstore: parse "read_fail=/runs": bad target "/runs"`, "stripesim: parse faults: 500-after=2"}},
		{"bad seed", "seed=x,commit_fail=charges", stripesim.Faults{}, "", 0, []string{`faultstore: parse "seed=x": bad seed`}},
		{"seed without store faults", "seed=3,latency=1ms", stripesim.Faults{}, "", 0, []string{"seed=N seeds store faults", "--seed"}},
		{"item without a value", "commit_fail", stripesim.Faults{}, "", 0, []string{`faultstore: parse "commit_fail": want KIND=TARGET`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFaults(tc.spec)
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", f)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.sim != tc.sim {
				t.Errorf("simulator faults %+v, want %+v", f.sim, tc.sim)
			}
			plan := f.storePlan(seed)
			if plan.String() != tc.store || len(plan.Rules) != tc.rules {
				t.Errorf("store plan %s (%d rules), want %s (%d)", plan, len(plan.Rules), tc.store, tc.rules)
			}
			// The plan travels to the functions as text: it must read back.
			if back, err := faultstore.Parse(plan.String()); err != nil || back.String() != plan.String() {
				t.Errorf("plan %s reads back as %s, %v", plan, back, err)
			}
			if f.injects() != (tc.rules > 0 || tc.sim != stripesim.Faults{}) {
				t.Errorf("injects() = %t", f.injects())
			}
		})
	}
}

// TestFaultsFlagBadSpec: a bad spec fails the flag's parsing, a usage error
// before any command opens or starts anything.
func TestFaultsFlagBadSpec(t *testing.T) {
	var o stackOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs)
	err := fs.Parse([]string{"--faults", "commit_lost=charges@0"})
	if err == nil || errors.Is(err, flag.ErrHelp) || !strings.Contains(err.Error(), `occurrence "0" is not a positive integer`) {
		t.Fatalf("parse: %v, want the store's complaint", err)
	}
}
