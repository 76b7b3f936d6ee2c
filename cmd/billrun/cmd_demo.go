package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"billrun.dev/billrun/internal/sample"
)

// defaultDemoCustomers is how many sample customers demo seeds.
const defaultDemoCustomers = 1000

func demoCommand() command {
	return command{name: "demo", summary: "seed sample customers if there are none and bill a period locally", run: runDemo}
}

func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("demo", "billrun demo [--customers N] [--period YYYY-MM] [--faults SPEC] [--seed N] [--lease D] [--data-dir DIR] [--json]", `Seeds a realistic sample of customers if the store has none (most pay, some
decline, some need authentication, some are billed above their ceiling), then
bills the period on the local stack with a live progress view. Run it again:
the period is already billed and nothing is charged.

Exit status: 0 billed or already billed, 1 failed, 2 usage, 3 already running.`)
	customers := fs.Int("customers", defaultDemoCustomers, "sample customers to seed when the store has none")
	period := periodFlag(fs)
	dataDir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print the outcome as JSON, without the live view")
	var so stackOptions
	so.register(fs)
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	if *customers < 1 {
		return usageError(fs, "--customers must be at least 1")
	}
	p, err := resolvePeriod(*period, time.Now(), so.env["BILLRUN_TIME_ZONE"])
	if err != nil {
		return usageError(fs, "%v", err)
	}
	t, err := openTarget(ctx, env, "demo", *dataDir, so)
	if err != nil {
		return err
	}
	defer t.Close()
	n, err := sample.Count(ctx, t.db)
	if err != nil {
		return err
	}
	if n == 0 {
		if err := seedSample(ctx, env.stdout, t, *customers, so.seed, *asJSON); err != nil {
			return err
		}
	}
	return executePeriod(ctx, env, t.ex, t.db, p, *asJSON)
}

// seedSample stores count sample customers, creating their Stripe customers in
// the stack's simulator.
func seedSample(ctx context.Context, w io.Writer, t *target, count int, seed int64, quiet bool) error {
	begin := time.Now()
	if err := storeWith(ctx, t, sample.Generate(count, seed)); err != nil {
		return fmt.Errorf("seed customers: %w", err)
	}
	if !quiet {
		fmt.Fprintf(w, "seeded %d sample customers in %s (seed %d)\n", count, time.Since(begin).Round(time.Millisecond), seed)
	}
	return nil
}
