package main

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/firestoredb"
)

func runCommand() command {
	return command{name: "run", summary: "bill a period: locally, or on Google Cloud with --project", run: runRun}
}

func runRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("run", "billrun run [--period YYYY-MM] [--data-dir DIR] [--faults SPEC] [--lease D] [--json]\n       billrun run --project P [--location L] [--period YYYY-MM] [--json]", "Bills a period with the billing workflow and follows it with a live view.\nLocally it goes through a running `billrun serve` on the same data directory,\nelse it starts the local stack in this process. With --project it starts the\nexecution on Google Cloud (Application Default Credentials) and reads the\ncounts from the run record in Firestore.\n\nExit status: 0 billed or already billed, 1 failed, 2 usage, 3 already running.")
	period := periodFlag(fs)
	dataDir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print the outcome as JSON, without the live view")
	project := fs.String("project", "", "run on Google Cloud in this `PROJECT` (counts from its Firestore)")
	location := fs.String("location", "us-central1", "the workflow's `REGION` on Google Cloud")
	database := fs.String("database", config.DefaultDatabase, "the Firestore database `ID` on Google Cloud")
	var so stackOptions
	so.register(fs)
	if err := parseNoArgs(fs, env, args); err != nil {
		return err
	}
	p, err := resolvePeriod(*period, time.Now(), so.env["BILLRUN_TIME_ZONE"])
	if err != nil {
		return usageError(fs, "%v", err)
	}
	if *project == "" {
		t, err := openTarget(ctx, env, "run", *dataDir, so)
		if err != nil {
			return err
		}
		defer t.Close()
		return executePeriod(ctx, env, t.ex, t.db, p, *asJSON)
	}
	if so.faults.injects() {
		return usageError(fs, "--faults is local only")
	}
	ex, err := newClientExecutor(ctx, *project, *location, "")
	if err != nil {
		return err
	}
	defer ex.Close()
	db, err := openFirestore(ctx, *project, *database)
	if err != nil {
		return err
	}
	defer db.Close()
	return executePeriod(ctx, env, ex, db, p, *asJSON)
}

// openFirestore opens a project's Firestore database with Application Default
// Credentials (or FIRESTORE_EMULATOR_HOST).
func openFirestore(ctx context.Context, project, database string) (store.Backend, error) {
	client, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return nil, fmt.Errorf("firestore: %w", err)
	}
	return firestoredb.NewFromClient(client), nil
}
