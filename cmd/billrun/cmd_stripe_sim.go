package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"billrun.dev/billrun/internal/stripesim"
)

// Defaults of billrun stripe-sim.
const (
	defaultStripeSimAddr    = "127.0.0.1:12111"
	defaultStripeSimDataDir = ".billrun/stripe"
	// stripeSimWebhookEvery is how often due webhooks are sent.
	stripeSimWebhookEvery = time.Second
	// stripeSimWebhookSecretEnv names the variable holding the signing
	// secret, so it never appears in a process listing.
	stripeSimWebhookSecretEnv = "STRIPE_WEBHOOK_SECRET"
)

func stripeSimCommand() command {
	return command{
		name:    "stripe-sim",
		summary: "serve the Stripe simulator (for stripe-go or curl)",
		run:     runStripeSim,
	}
}

func runStripeSim(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("stripe-sim", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	addr := fs.String("addr", defaultStripeSimAddr, "address to listen on (`host:port`; port 0 picks one)")
	dataDir := fs.String("data-dir", defaultStripeSimDataDir, "directory keeping the simulator's state across restarts; \"\" keeps it in memory")
	faultSpec := fs.String("faults", "", "faults to inject, as comma-separated name=value `SPEC`, e.g. latency=uniform:5ms:80ms,rate=25,concurrency=10,500-after=0.05,drop-after=0.02,slow-commit=0.05:3s,first=1 (all names: go doc ./internal/stripesim ParseFaults)")
	seed := fs.Int64("seed", 1, "seed that makes the faults reproducible")
	searchDelay := fs.Duration("search-delay", 0, "how long a new PaymentIntent stays invisible to search (0: at once)")
	verbose := fs.Bool("verbose", false, "log every request to stderr")
	webhookURL := fs.String("webhook-url", "", "endpoint for payment_intent.succeeded/payment_failed events, signed with $"+stripeSimWebhookSecretEnv)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: billrun stripe-sim [--addr HOST:PORT] [--data-dir D] [--faults SPEC] [--seed N]")
		fmt.Fprintln(fs.Output(), "\nServes a stateful Stripe simulator. Point stripe-go at it with")
		fmt.Fprintln(fs.Output(), "stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(\"http://HOST:PORT\")});")
		fmt.Fprintln(fs.Output(), "any sk_test_ key is accepted. GET /_sim/ledger lists the payments made.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "billrun stripe-sim: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	faults, err := stripesim.ParseFaults(*faultSpec)
	if err != nil {
		fmt.Fprintf(env.stderr, "billrun stripe-sim: --faults: %v\n", err)
		return errUsage
	}
	secret := env.getenv(stripeSimWebhookSecretEnv)
	if *webhookURL != "" && secret == "" {
		fmt.Fprintf(env.stderr, "billrun stripe-sim: --webhook-url needs $%s (the whsec_… signing secret)\n", stripeSimWebhookSecretEnv)
		return errUsage
	}

	cfg := stripesim.Config{
		DataDir: *dataDir, Faults: faults, Seed: *seed, SearchDelay: *searchDelay,
		WebhookURL: *webhookURL, WebhookSecret: secret,
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(env.stderr, nil))
	}
	sim, err := stripesim.New(cfg)
	if err != nil {
		return fmt.Errorf("stripe-sim: %w", err)
	}
	defer sim.Close()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("stripe-sim: listen: %w", err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	hooksCtx, stopHooks := context.WithCancel(ctx)
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		sim.RunWebhooks(hooksCtx, stripeSimWebhookEvery)
	}()
	defer func() {
		stopHooks()
		<-hooksDone // before sim.Close, so no delivery outlives the state file
	}()

	where := *dataDir
	if where == "" {
		where = "memory"
	}
	fmt.Fprintf(env.stdout, "stripe-sim listening on http://%s (state: %s, faults: %q, seed: %d)\n", l.Addr(), where, faults.String(), *seed)

	select {
	case err := <-served:
		return fmt.Errorf("stripe-sim: serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("stripe-sim: shutdown: %w", err)
	}
	fmt.Fprintln(env.stdout, "stripe-sim stopped")
	return nil
}
