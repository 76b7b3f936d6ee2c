package emulator

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store"
)

// envHelper makes the test binary a helper that starts an emulator, prints its
// host and waits to be killed.
const envHelper = "BILLRUN_EMULATOR_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "1" {
		e, err := Start(context.Background())
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(e.Host())
		select {}
	}
	os.Exit(m.Run())
}

// startOwn starts an emulator of this test's own, since these tests are about
// starting and stopping one.
func startOwn(t *testing.T) *Emulator {
	t.Helper()
	if os.Getenv(EnvHost) != "" {
		t.Skipf("%s is set: the emulator's lifecycle is someone else's", EnvHost)
	}
	e, err := Start(t.Context())
	if err != nil {
		unavailable(t, err)
	}
	return e
}

// waitGone waits until nothing serves host and no process mentions it or its
// port on its command line (gcloud, the wrapper script, Java).
func waitGone(t *testing.T, host string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(host)
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := processesMentioning(host, "--port="+port)
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			conn.Close()
		}
		if err != nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator on %s still running: port answers: %v; processes: %v", host, err == nil, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func processesMentioning(needles ...string) []string {
	var found []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		for _, n := range needles {
			if strings.Contains(cmd, n) {
				found = append(found, filepath.Base(filepath.Dir(p))+": "+cmd)
				break
			}
		}
	}
	return found
}

func TestStartServeResetStop(t *testing.T) {
	e := startOwn(t)
	// In a subtest, so NewDB's cleanup (closing and resetting) runs before Stop.
	t.Run("use", func(t *testing.T) {
		db := e.NewDB(t)
		err := db.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
			return tx.Set("runs/2026-10", store.Data{"state": "completed"})
		})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		other := e.NewDB(t)
		if _, err := other.Get(t.Context(), "runs/2026-10"); err == nil {
			t.Error("a second NewDB sees the first one's documents")
		}
	})
	if err := e.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	waitGone(t, e.Host())
}

// TestDiesWithItsTestBinary: a test binary killed outright (as a test timeout
// or a crash ends it) leaves no emulator behind.
func TestDiesWithItsTestBinary(t *testing.T) {
	if os.Getenv(EnvHost) != "" {
		t.Skipf("%s is set: the emulator's lifecycle is someone else's", EnvHost)
	}
	if _, err := exec.LookPath("gcloud"); err != nil {
		unavailable(t, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	host := strings.TrimSpace(line)
	if err != nil || strings.HasPrefix(host, "error:") {
		cmd.Process.Kill()
		cmd.Wait()
		unavailable(t, fmt.Errorf("helper: %q, %v", host, err))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitGone(t, host)
}
