package main

import (
	"errors"
	"strings"

	"billrun.dev/billrun/internal/store/faultstore"
	"billrun.dev/billrun/internal/stripesim"
)

// faultsFlag is --faults SPEC: one comma-separated spec mixing the Stripe
// simulator's faults and the functions' store faults. It is split and parsed
// when the flag is set, so a bad spec is a usage error before anything opens
// or starts.
type faultsFlag struct {
	spec string
	sim  stripesim.Faults
	// store holds the store's rules; seeded says the spec gave its seed=N.
	store  faultstore.Plan
	seeded bool
}

func (f *faultsFlag) String() string { return f.spec }

func (f *faultsFlag) Set(spec string) error {
	parsed, err := parseFaults(spec)
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

// injects reports whether the spec asks for any fault.
func (f faultsFlag) injects() bool { return f.sim != (stripesim.Faults{}) || len(f.store.Rules) > 0 }

// storePlan is the store's plan, seeded with seed (--seed) unless the spec
// gave its own; a plan without rules injects nothing.
func (f faultsFlag) storePlan(seed int64) faultstore.Plan {
	p := f.store
	if !f.seeded {
		p.Seed = uint64(seed)
	}
	return p
}

// parseFaults splits spec by each item's key: faultstore's kinds
// (commit_fail, commit_lost, read_fail) and seed=N go to the store, every
// other item to the simulator. Each part is parsed by its own package (whose
// errors name it), and the problems of both are reported at once.
func parseFaults(spec string) (faultsFlag, error) {
	f := faultsFlag{spec: strings.TrimSpace(spec)}
	var storeItems, simItems []string
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, _, _ := strings.Cut(item, "=")
		switch faultstore.Kind(key) {
		case "seed":
			f.seeded = true
			storeItems = append(storeItems, item)
		case faultstore.CommitFail, faultstore.CommitLost, faultstore.ReadFail:
			storeItems = append(storeItems, item)
		default:
			simItems = append(simItems, item)
		}
	}
	var errs []error
	var err error
	if f.store, err = faultstore.Parse(strings.Join(storeItems, ",")); err != nil {
		errs = append(errs, err)
	} else if f.seeded && len(f.store.Rules) == 0 {
		// The simulator takes its seed from --seed only: a seed=N without
		// store faults would be silently ignored.
		errs = append(errs, errors.New("seed=N seeds store faults (commit_fail, commit_lost, read_fail) and the spec has none; seed the simulator with --seed"))
	}
	if f.sim, err = stripesim.ParseFaults(strings.Join(simItems, ",")); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return faultsFlag{}, errors.Join(errs...)
	}
	return f, nil
}
