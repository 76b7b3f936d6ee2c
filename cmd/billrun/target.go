package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/localstack"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/workflow"
)

// target is where local commands run executions: a `billrun serve` already
// serving the data directory, or a stack this process starts.
type target struct {
	ex     executor
	db     store.Backend
	simURL string
	// sim is this process's simulator (nil through billrun serve), and faults
	// the faults it injects during runs.
	sim    *stripesim.Server
	faults stripesim.Faults
	close  []func() error
}

// openTarget finds billrun serve's stack on dataDir or starts one for
// command.
func openTarget(ctx context.Context, env *cliEnv, command, dataDir string, so stackOptions) (*target, error) {
	db, err := openStore(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	t := &target{db: db, close: []func() error{db.Close}}
	if info, ok := runningServer(dataDir); ok {
		if so.faults.injects() {
			t.Close()
			return nil, fmt.Errorf("--faults needs a stack of its own, and billrun serve (pid %d) serves %s: stop it or use another --data-dir", info.PID, dataDir)
		}
		c, err := newClientExecutor(ctx, workflow.DefaultProject, workflow.DefaultLocation, info.API)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.ex, t.simURL = c, info.SimURL
		t.close = append(t.close, c.Close)
		return t, nil
	}
	s, err := startStack(ctx, env, command, dataDir, "", so)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.ex, t.simURL, t.sim, t.faults = stackExecutor{s.Stack}, s.SimURL, s.Sim, s.faults
	t.close = append(t.close, s.Close)
	return t, nil
}

// Close releases everything in reverse order.
func (t *target) Close() error {
	var errs []error
	for i := len(t.close) - 1; i >= 0; i-- {
		errs = append(errs, t.close[i]())
	}
	return errors.Join(errs...)
}

// withoutFaults runs fn with the simulator's faults off: they are for billing
// runs, not for setting customers up. Store faults need no switching: they
// live in the functions' store, and customers are set up through t.db.
func (t *target) withoutFaults(fn func() error) error {
	if t.sim == nil {
		return fn()
	}
	if err := t.sim.SetFaults(stripesim.Faults{}); err != nil {
		return err
	}
	return errors.Join(fn(), t.sim.SetFaults(t.faults))
}

// stripeClientFor is a stripe-go client for the target's simulator.
func stripeClientFor(t *target) *stripe.Client {
	return billing.NewStripeClient(localstack.StripeKey, t.simURL, &http.Client{Timeout: 30 * time.Second})
}
