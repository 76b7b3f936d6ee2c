package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"billrun.dev/billrun/internal/billing"
)

func reportCommand() command {
	return command{name: "report", summary: "one row per customer of a period: outcome, amount, attempts, payment, reason", run: runReport}
}

// reportRow is one customer's line.
type reportRow struct {
	Customer string `json:"customer"`
	Outcome  string `json:"outcome"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Attempts int64  `json:"attempts"`
	Payment  string `json:"payment_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func rowOf(r billing.ChargeRecord) reportRow {
	reason := r.Reason
	for _, code := range []string{r.DeclineCode, r.ErrorCode} {
		if code != "" && !strings.Contains(reason, code) {
			reason = strings.TrimSpace(code + ": " + reason)
			break
		}
	}
	return reportRow{Customer: r.CustomerID, Outcome: string(r.State), Amount: r.Amount, Currency: r.Currency,
		Attempts: r.Attempts, Payment: r.PaymentIntent, Reason: strings.TrimSuffix(reason, ": ")}
}

func runReport(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("report", "billrun report --period YYYY-MM [--format table|csv|json] [--data-dir DIR]", "One row per customer of the period, from the charge records (live while a run goes).")
	period := fs.String("period", "", "billing period `YYYY-MM` (required)")
	dataDir := dataDirFlag(fs)
	format := fs.String("format", "table", "output `FORMAT`: table, csv or json")
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	switch {
	case *period == "":
		return usageError(fs, "--period is required")
	case *format != "table" && *format != "csv" && *format != "json":
		return usageError(fs, "--format %q: want table, csv or json", *format)
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
	rows := make([]reportRow, len(records))
	for i, r := range records {
		rows[i] = rowOf(r)
	}
	return writeReport(env.stdout, *format, rows)
}

func writeReport(w io.Writer, format string, rows []reportRow) error {
	switch format {
	case "json":
		return printOut(w, true, rows, nil)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"customer", "outcome", "amount", "currency", "attempts", "payment_id", "reason"})
		for _, r := range rows {
			cw.Write([]string{r.Customer, r.Outcome, strconv.FormatInt(r.Amount, 10), r.Currency, strconv.FormatInt(r.Attempts, 10), r.Payment, r.Reason})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CUSTOMER\tOUTCOME\tAMOUNT\tATTEMPTS\tPAYMENT\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%d\t%s\t%s\n", r.Customer, r.Outcome, strings.ToUpper(r.Currency), money(r.Amount), r.Attempts, r.Payment, r.Reason)
	}
	return tw.Flush()
}
