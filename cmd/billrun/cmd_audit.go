package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/localstack"
	"billrun.dev/billrun/internal/progress"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
)

func auditCommand() command {
	return command{name: "audit", summary: "cross-check a period's records against the payments in Stripe (or the simulator)", run: runAudit}
}

func runAudit(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("audit", "billrun audit --period YYYY-MM [--data-dir DIR | --project P] [--stripe] [--json]", `Compares the period's charge records with the successful payments Stripe
holds for the period: locally the Stripe simulator's ledger (read from the data
directory); with --stripe, or --project (records from that project's Firestore),
Stripe's list API with the key in $STRIPE_SECRET_KEY (and the API base in
$BILLRUN_STRIPE_API_BASE, if set). The key is never printed.

Exit status: 0 clean; 1 on any duplicate payment, unsettled customer, payment
without a record or recorded payment missing from the ledger; 2 usage.`)
	period := fs.String("period", "", "billing period `YYYY-MM` (required)")
	dataDir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	useStripe := fs.Bool("stripe", false, "read payments from Stripe's list API instead of the simulator's ledger")
	project := fs.String("project", "", "read records from this Google Cloud `PROJECT`'s Firestore (implies --stripe)")
	database := fs.String("database", config.DefaultDatabase, "the Firestore database `ID` with --project")
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	switch {
	case *period == "":
		return usageError(fs, "--period is required")
	}
	var db store.Backend
	var err error
	if *project != "" {
		db, err = openFirestore(ctx, *project, *database)
	} else {
		db, err = openStore(ctx, *dataDir)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	records, err := billing.ListCharges(ctx, db, *period)
	if err != nil {
		return err
	}
	var ledger []stripesim.Payment
	if *useStripe || *project != "" {
		ledger, err = stripePayments(ctx, env.getenv, *period)
	} else {
		ledger, err = stripesim.ReadLedger(filepath.Join(*dataDir, localstack.SimDir))
	}
	if err != nil {
		return fmt.Errorf("read payments: %w", err)
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

// stripePayments lists the successful PaymentIntents created since the
// period began (billing happens after it) whose metadata names the period, with
// the configured Stripe key.
func stripePayments(ctx context.Context, getenv func(string) string, period string) ([]stripesim.Payment, error) {
	cfg, err := config.Load(func(k string) string {
		if k == "BILLRUN_STORE" {
			return config.StoreEmbedded // only the Stripe settings matter here
		}
		return getenv(k)
	})
	if err != nil {
		return nil, err
	}
	start, err := time.Parse("2006-01", period)
	if err != nil {
		return nil, err
	}
	sc := billing.NewStripeClient(cfg.StripeKey, cfg.StripeBaseURL, &http.Client{Timeout: cfg.StripeTimeout})
	params := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: start.Unix()}}
	params.Limit = stripe.Int64(100)
	var out []stripesim.Payment
	for pi, err := range sc.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return nil, err
		}
		if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.Metadata[billing.MetaPeriod] != period {
			continue
		}
		p := stripesim.Payment{PaymentIntentID: pi.ID, Amount: pi.Amount, Currency: string(pi.Currency), Metadata: pi.Metadata, Created: time.Unix(pi.Created, 0)}
		if pi.Customer != nil {
			p.Customer = pi.Customer.ID
		}
		out = append(out, p)
	}
	return out, nil
}
