package main

import (
	"context"
	"fmt"
	"strings"

	"billrun.dev/billrun/internal/api"
)

// defaultServeAddr is where billrun serve's Executions API listens.
const defaultServeAddr = "127.0.0.1:8091"

func serveCommand() command {
	return command{name: "serve", summary: "keep the local stack up: Executions API, functions, Stripe simulator", run: runServe}
}

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("serve", "billrun serve [--addr HOST:PORT] [--data-dir DIR] [--faults SPEC] [--lease D]", `Starts the local stack and keeps it up until interrupted. The Executions API
accepts any project and location; the workflow is "billing". billrun run,
demo and customers on the same data directory go through it.`)
	addr := fs.String("addr", defaultServeAddr, "the Executions API's address (`HOST:PORT`; port 0 picks one)")
	dataDir := dataDirFlag(fs)
	var so stackOptions
	so.register(fs)
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	if info, ok := runningServer(*dataDir); ok {
		return fmt.Errorf("%s is already served by billrun (pid %d) at %s", *dataDir, info.PID, info.API)
	}
	s, err := startStack(ctx, env, "serve", *dataDir, *addr, so)
	if err != nil {
		return err
	}
	defer s.Close()
	w := env.stdout
	fmt.Fprintf(w, "billrun local stack on %s\n", *dataDir)
	fmt.Fprintf(w, "  Executions API     %s  (REST and gRPC; any project and location, workflow \"billing\")\n", s.APIURL)
	fmt.Fprintf(w, "  functions          %s/{%s}\n", s.FunctionsURL, strings.Join(api.Names(), ","))
	fmt.Fprintf(w, "  vault proxy        %s\n", s.VaultProxyURL)
	fmt.Fprintf(w, "  Stripe simulator   %s  (GET /_sim/ledger)\n", s.SimURL)
	fmt.Fprintln(w, "\nDrive it with gcloud:")
	fmt.Fprintf(w, "  gcloud config set api_endpoint_overrides/workflowexecutions %s/\n", s.APIURL)
	fmt.Fprintln(w, "  gcloud config set auth/disable_credentials true")
	fmt.Fprintln(w, `  gcloud workflows run billing --project billrun-local --location local --data='{"period":"2026-10"}'`)
	fmt.Fprintln(w, "\nor billrun run / status / report / audit with --data-dir", *dataDir)
	<-ctx.Done()
	fmt.Fprintln(w, "stopping")
	return nil
}
