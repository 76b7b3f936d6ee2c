package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/sample"
)

func customersCommand() command {
	return command{name: "customers", summary: "import, seed or list the local customers", run: runCustomers}
}

func customersUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  billrun customers import FILE.csv [--data-dir DIR]")
	fmt.Fprintln(w, "  billrun customers seed --count N [--seed N] [--data-dir DIR]")
	fmt.Fprintln(w, "  billrun customers list [--data-dir DIR] [--json]")
	fmt.Fprintf(w, "\nimport reads CSV with the header %s;\n", strings.Join(sample.Header, ","))
	fmt.Fprintln(w, "an empty stripe_customer_id gets a customer in the Stripe simulator. seed adds a")
	fmt.Fprintln(w, "realistic sample (ids cus_00001…; the same seed gives the same customers).")
	fmt.Fprintln(w, "Either replaces customers with the same id.")
}

func runCustomers(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		customersUsage(env.stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	fs := flag.NewFlagSet("customers "+args[0], flag.ContinueOnError)
	dataDir := dataDirFlag(fs)
	fs.Usage = func() { customersUsage(fs.Output()); fmt.Fprintln(fs.Output(), "\nFlags:"); fs.PrintDefaults() }
	switch args[0] {
	case "import":
		pos, err := parseFlags(fs, env, args[1:])
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usageError(fs, "want one CSV file")
		}
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		customers, err := sample.ReadCSV(f)
		if err != nil {
			return err
		}
		return storeCustomers(ctx, env, *dataDir, func(t *target) error {
			return storeWith(ctx, t, customers)
		}, fmt.Sprintf("imported %d customers", len(customers)))
	case "seed":
		count := fs.Int("count", 0, "how many sample customers to add (required)")
		seed := fs.Int64("seed", 1, "seed of the sample")
		pos, err := parseFlags(fs, env, args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usageError(fs, "unexpected argument %q", pos[0])
		}
		if *count < 1 {
			return usageError(fs, "--count must be at least 1")
		}
		return storeCustomers(ctx, env, *dataDir, func(t *target) error {
			return storeWith(ctx, t, sample.Generate(*count, *seed))
		}, fmt.Sprintf("seeded %d sample customers", *count))
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		pos, err := parseFlags(fs, env, args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usageError(fs, "unexpected argument %q", pos[0])
		}
		db, err := openStore(ctx, *dataDir)
		if err != nil {
			return err
		}
		defer db.Close()
		customers, err := sample.List(ctx, db)
		if err != nil {
			return err
		}
		rows := make([]customerRow, len(customers))
		for i, c := range customers {
			rows[i] = customerRow{ID: c.ID, StripeCustomer: c.StripeCustomerID, PaymentMethod: c.PaymentMethod, Currency: c.Currency,
				AmountSource: c.AmountSource, PlanAmount: c.PlanAmount, Ceiling: c.Ceiling, Active: c.Active}
		}
		return printOut(env.stdout, *asJSON, rows, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTRIPE CUSTOMER\tPAYMENT METHOD\tAMOUNT\tCEILING\tACTIVE")
			for _, c := range customers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%t\n", c.ID, c.StripeCustomerID, c.PaymentMethod,
					strings.ToUpper(c.Currency), money(c.PlanAmount), money(c.Ceiling), c.Active)
			}
			return tw.Flush()
		})
	}
	fmt.Fprintf(env.stderr, "billrun customers: unknown subcommand %q\n\n", args[0])
	customersUsage(env.stderr)
	return errUsage
}

// customerRow is one customer in customers list --json.
type customerRow struct {
	ID             string `json:"id"`
	StripeCustomer string `json:"stripe_customer_id"`
	PaymentMethod  string `json:"payment_method"`
	Currency       string `json:"currency"`
	AmountSource   string `json:"amount_source"`
	PlanAmount     int64  `json:"plan_amount"`
	Ceiling        int64  `json:"ceiling"`
	Active         bool   `json:"active"`
}

// storeWith stores customers, creating Stripe customers in the target's
// simulator.
func storeWith(ctx context.Context, t *target, customers []billing.Customer) error {
	return t.withoutFaults(func() error { return sample.Store(ctx, t.db, stripeClientFor(t), customers) })
}

// storeCustomers runs store on the data directory's stack (started here if
// billrun serve is not running) and prints done.
func storeCustomers(ctx context.Context, env *cliEnv, dataDir string, store func(*target) error, done string) error {
	t, err := openTarget(ctx, env, "customers", dataDir, defaultStackOptions())
	if err != nil {
		return err
	}
	defer t.Close()
	if err := store(t); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, done)
	return nil
}
