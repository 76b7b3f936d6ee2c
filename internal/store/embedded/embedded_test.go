package embedded_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/storetest"
)

func open(t testing.TB, path string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		return open(t, filepath.Join(t.TempDir(), "billrun.db"))
	})
}

func BenchmarkWrites(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend {
		return open(b, filepath.Join(b.TempDir(), "billrun.db"))
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "billrun.db")
	db, err := embedded.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	err = db.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.Set("runs/2026-10", store.Data{"state": "completed"})
	})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	doc, err := open(t, path).Get(t.Context(), "runs/2026-10")
	if err != nil || doc.Data["state"] != "completed" {
		t.Fatalf("after reopen: %v, %v", doc.Data, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database, but long enough to have a header of some sort......................................................"), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	db := open(t, newer)
	if err := db.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		return tx.Set("a/b", store.Data{})
	}); err != nil {
		t.Fatal(err)
	}
	setUserVersion(t, newer, 2)
	tests := []struct{ name, path string }{
		{"not a database", notDB},
		{"newer schema", newer},
		{"empty path", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if db, err := embedded.Open(t.Context(), tc.path); err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
		})
	}
}

// TestTwoHandlesOneFile: two handles on one file (as two processes have)
// share data, and their concurrent increments all count.
func TestTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "billrun.db")
	a, b := open(t, path), open(t, path)
	// Write-ahead-log mode is what lets readers and a writer share the file.
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no write-ahead log next to the file: %v", err)
	}
	if err := increment(t.Context(), a, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, db := range []*embedded.DB{a, b} {
		wg.Go(func() {
			for range 25 {
				if err := increment(t.Context(), db, 1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := count(t, b); got != 50 {
		t.Fatalf("n = %d, want 50", got)
	}
}

func increment(ctx context.Context, db store.Backend, by int64) error {
	return db.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		doc, err := tx.Get(ctx, "counters/c")
		if errors.Is(err, store.ErrNotFound) {
			return tx.Set("counters/c", store.Data{"n": by})
		}
		if err != nil {
			return err
		}
		return tx.Update("counters/c", store.Data{"n": doc.Data["n"].(int64) + by})
	})
}

func count(t *testing.T, db store.Backend) int64 {
	t.Helper()
	doc, err := db.Get(t.Context(), "counters/c")
	if err != nil {
		t.Fatalf("get counter: %v", err)
	}
	return doc.Data["n"].(int64)
}

// The helper process for TestSeveralProcesses: increments the counter in the
// file named by the environment, as a second billrun process would.
const (
	envHelperFile = "BILLRUN_EMBEDDED_HELPER_FILE"
	envHelperN    = "BILLRUN_EMBEDDED_HELPER_N"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envHelperFile); path != "" {
		os.Exit(helperProcess(path))
	}
	os.Exit(m.Run())
}

func helperProcess(path string) int {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(envHelperN))
	if err == nil {
		var db *embedded.DB
		if db, err = embedded.Open(ctx, path); err == nil {
			defer db.Close()
			for i := 0; i < n && err == nil; i++ {
				err = increment(ctx, db, 1)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// TestSeveralProcesses: processes writing one file at once, while this one
// reads and writes it too, lose no update and never fail on a lock.
func TestSeveralProcesses(t *testing.T) {
	const procs, each = 3, 30
	path := filepath.Join(t.TempDir(), "billrun.db")
	db := open(t, path)
	if err := increment(t.Context(), db, 0); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelperFile+"="+path, envHelperN+"="+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start helper: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	for range each {
		if err := increment(t.Context(), db, 1); err != nil {
			t.Errorf("increment here: %v", err)
		}
		// A reader such as `billrun status` must see progress, not a lock error.
		if _, err := db.Get(t.Context(), "counters/c"); err != nil {
			t.Errorf("read while others write: %v", err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v", i, err)
		}
	}
	if got := count(t, db); got != (procs+1)*each {
		t.Fatalf("n = %d, want %d", got, (procs+1)*each)
	}
}

func setUserVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		t.Fatal(err)
	}
}
