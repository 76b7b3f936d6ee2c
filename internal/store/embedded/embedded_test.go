package embedded_test

import (
	"bufio"
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
	"time"

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
	// Characters that mean something in a URI must not change the file used.
	path := filepath.Join(t.TempDir(), "sub dir", "a?b#c%20", "billrun.db")
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
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the store is not in the named file: %v", err)
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

// envHelperHold makes the helper hold a transaction open forever after
// incrementing: it holds the write lock when it is killed.
const envHelperHold = "BILLRUN_EMBEDDED_HELPER_HOLD"

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
				if err = increment(ctx, db, 1); err == nil {
					fmt.Println("committed", i+1)
				}
			}
			if err == nil && os.Getenv(envHelperHold) == "1" {
				err = db.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
					if _, err := tx.Get(ctx, "counters/c"); err != nil {
						return err
					}
					fmt.Println("holding")
					select {}
				})
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

// TestCrashMidTransaction: a process killed while committing in a loop, or
// while holding the write lock, leaves a consistent file: every acknowledged
// increment is there (at most one more, committed but not yet reported), and
// the lock is free at once for the others.
func TestCrashMidTransaction(t *testing.T) {
	tests := []struct {
		name string
		hold bool
	}{
		{"killed while committing", false},
		{"killed holding the write lock", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "billrun.db")
			db := open(t, path)
			if err := increment(t.Context(), db, 0); err != nil {
				t.Fatal(err)
			}
			n := 1000000
			if tc.hold {
				n = 5
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envHelperFile+"="+path, envHelperN+"="+strconv.Itoa(n))
			if tc.hold {
				cmd.Env = append(cmd.Env, envHelperHold+"=1")
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked, killed := int64(0), false
			// Kill the helper mid-stream, then read what it reported before dying.
			for lines := bufio.NewScanner(out); lines.Scan(); {
				var k int64
				if _, err := fmt.Sscanf(lines.Text(), "committed %d", &k); err == nil {
					acked = k
				}
				if !killed && ((tc.hold && lines.Text() == "holding") || (!tc.hold && acked >= 50)) {
					if err := cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
			cmd.Wait()
			if !killed {
				t.Fatalf("helper ended before it was killed (%d increments)", acked)
			}
			start := time.Now()
			if err := increment(t.Context(), db, 0); err != nil {
				t.Fatalf("write after the crash: %v", err)
			}
			if waited := time.Since(start); waited > 2*time.Second {
				t.Errorf("write after the crash waited %v for the lock", waited)
			}
			if got := count(t, db); got != acked && got != acked+1 {
				t.Errorf("n = %d after %d acknowledged increments", got, acked)
			}
			var check string
			if err := rawQueryRow(t, path, "PRAGMA integrity_check", &check); err != nil || check != "ok" {
				t.Errorf("integrity_check = %q, %v", check, err)
			}
		})
	}
}

func rawQueryRow(t *testing.T, path, query string, dst any) error {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRow(query).Scan(dst)
}
