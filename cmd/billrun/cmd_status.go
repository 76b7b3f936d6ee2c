package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/progress"
	"billrun.dev/billrun/internal/sample"
)

func statusCommand() command {
	return command{name: "status", summary: "show a period's run: state, owner, lease, counts (live while it runs)", run: runStatus}
}

func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("status", "billrun status [--period YYYY-MM] [--data-dir DIR] [--json]", `Reads the run record and charge records of the local store; works while a
run or billrun serve uses the same data directory.`)
	period := periodFlag(fs)
	dataDir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	p, err := resolvePeriod(*period, time.Now(), "")
	if err != nil {
		return usageError(fs, "%v", err)
	}
	db, err := openStore(ctx, *dataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := sample.Count(ctx, db)
	if err != nil {
		return err
	}
	snap, err := progress.Read(ctx, db, p, n)
	if err != nil {
		return err
	}
	run, err := billing.GetRun(ctx, db, p)
	if err != nil && snap.State != "" {
		return err
	}
	return printOut(env.stdout, *asJSON, snap, func(w io.Writer) error {
		switch snap.State {
		case "":
			fmt.Fprintf(w, "period %s: not started (%d customers)\n", p, n)
			return nil
		case billing.RunInProgress:
			left := time.Until(run.LeaseExpiresAt).Round(time.Second)
			lease := fmt.Sprintf("lease ends in %s", left)
			if left <= 0 {
				lease = fmt.Sprintf("lease expired %s ago: the next run takes over", -left)
			}
			fmt.Fprintf(w, "period %s: in progress, execution %s, %s\n", p, snap.Owner, lease)
			fmt.Fprintln(w, snap.Line(time.Time{}))
			return nil
		}
		fmt.Fprintf(w, "period %s: %s by execution %s\n", p, snap.State, snap.Owner)
		printCounts(w, snap)
		return nil
	})
}
