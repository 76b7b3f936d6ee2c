package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/localstack"
	"billrun.dev/billrun/internal/progress"
	"billrun.dev/billrun/internal/stripesim"
)

func auditCommand() command {
	return command{name: "audit", summary: "cross-check a period's records against the Stripe simulator's ledger", run: runAudit}
}

func runAudit(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("audit", "billrun audit --period YYYY-MM [--data-dir DIR] [--json]", `Compares the period's charge records with the successful payments in the
Stripe simulator's ledger (the ground truth, read from the data directory).

Exit status: 0 clean; 1 on any duplicate payment, unsettled customer, payment
without a record or recorded payment missing from the ledger; 2 usage.`)
	period := fs.String("period", "", "billing period `YYYY-MM` (required)")
	dataDir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	switch {
	case *period == "":
		return usageError(fs, "--period is required")
	}
	db, err := openStore(ctx, *dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	records, err := billing.ListCharges(ctx, db, *period)
	if err != nil {
		return err
	}
	ledger, err := stripesim.ReadLedger(filepath.Join(*dataDir, localstack.SimDir))
	if err != nil {
		return fmt.Errorf("read the simulator's ledger: %w", err)
	}
	a := progress.Check(*period, records, ledger)
	if err := printOut(env.stdout, *asJSON, a, func(w io.Writer) error {
		fmt.Fprintf(w, "audit %s: %d records, %d successful payments, %d problems\n", a.Period, a.Records, a.Payments, len(a.Problems))
		for _, p := range a.Problems {
			fmt.Fprintf(w, "  %-24s %-12s %s\n", p.Kind, p.Customer, p.Detail)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(a.Problems) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("audit %s: %d problems", a.Period, len(a.Problems))}
	}
	return nil
}
