// Package tests holds billrun's end-to-end tests: the real `billrun` binary
// (built once), the production workflows/billing.yaml on the local engine,
// the functions served by functions-framework-go, the Stripe simulator and
// the embedded store, all over real HTTP. Each test gets its own data
// directory and asserts the two promises that matter: the simulator's ledger
// holds at most one successful payment per (period, customer), and a
// completed run's counts add up to the customers due.
package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/localstack"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/stripesim"
)

// commandTimeout bounds every billrun invocation.
const commandTimeout = 2 * time.Minute

// period is billed by every test (a past month, as ValidatePeriod requires).
const period = "2026-10"

var (
	binary   string // the billrun binary
	repoRoot string
	// configHome is every billrun's XDG_CONFIG_HOME, so the vault signing
	// secrets a stack generates (localstack.SecretsDir) stay in this run's
	// temporary directory instead of the user's configuration.
	configHome string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	dir, err := os.MkdirTemp("", "billrun-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "billrun")
	configHome = filepath.Join(dir, "config")
	build := exec.Command("go", "build", "-o", binary, "./cmd/billrun")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build billrun: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is one billrun invocation's outcome.
type result struct {
	stdout, stderr string
	code           int
}

// billrun runs the binary in dataDir's stack with args and waits for it.
func billrun(t *testing.T, dataDir string, args ...string) result {
	t.Helper()
	return billrunEnv(t, dataDir, nil, args...)
}

// billrunEnv is billrun with environment variables (K=V) added.
func billrunEnv(t *testing.T, dataDir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), commandTimeout)
	defer cancel()
	cmd := command(ctx, dataDir, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("billrun %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("billrun %v: did not end within %s\n%s", args, commandTimeout, r.stderr)
	}
	return r
}

// command prepares billrun args on dataDir, run from the repository's root
// as a user would.
func command(ctx context.Context, dataDir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, append(args, "--data-dir", dataDir)...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+configHome)
	return cmd
}

// mustSucceed fails the test unless r exited 0.
func (r result) mustSucceed(t *testing.T, what string) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
	}
	return r
}

// runOutcome is billrun run --json's output (the fields the tests read).
type runOutcome struct {
	Period    string `json:"period"`
	Status    string `json:"status"`
	Execution struct {
		ID    string `json:"execution"`
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"execution"`
	Progress struct {
		Owner   string           `json:"owner"`
		Retried int64            `json:"retried"`
		Summary *billing.Summary `json:"summary"`
	} `json:"progress"`
}

// runPeriod bills period with billrun run --json and returns what it printed.
func runPeriod(t *testing.T, dataDir string, args ...string) (runOutcome, result) {
	t.Helper()
	r := billrun(t, dataDir, append([]string{"run", "--json", "--period", period}, args...)...)
	var out runOutcome
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("billrun run: exit %d, output is not JSON: %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	return out, r
}

// seedCustomers adds count sample customers.
func seedCustomers(t *testing.T, dataDir string, count int) {
	t.Helper()
	billrun(t, dataDir, "customers", "seed", "--count", fmt.Sprint(count)).mustSucceed(t, "customers seed")
}

// importCustomers imports CSV rows (without the header).
func importCustomers(t *testing.T, dataDir string, rows ...string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "customers.csv")
	text := "id,stripe_customer_id,payment_method,currency,plan_amount,ceiling,active\n" + strings.Join(rows, "\n") + "\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	billrun(t, dataDir, "customers", "import", file).mustSucceed(t, "customers import")
}

// assertOnce checks the simulator's ledger: at most one successful payment
// per (period, customer), and billrun audit agrees. It returns the period's
// payments.
func assertOnce(t *testing.T, dataDir string) []stripesim.Payment {
	t.Helper()
	ledger, err := stripesim.ReadLedger(filepath.Join(dataDir, localstack.SimDir))
	if err != nil {
		t.Fatal(err)
	}
	var ours []stripesim.Payment
	for _, p := range ledger {
		if p.Metadata[billing.MetaPeriod] == period {
			ours = append(ours, p)
		}
	}
	dups := stripesim.Duplicates(ours, func(p stripesim.Payment) string { return p.Metadata[billing.MetaCustomer] })
	for customer, ps := range dups {
		t.Errorf("customer %s paid %d times in %s", customer, len(ps), period)
	}
	if r := billrun(t, dataDir, "audit", "--period", period); r.code != 0 {
		t.Errorf("billrun audit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return ours
}

// assertCompleted checks a completed run's summary: counts add up to due, and
// due is the number of customers.
func assertCompleted(t *testing.T, out runOutcome, customers int64) *billing.Summary {
	t.Helper()
	if out.Status != "completed" {
		t.Fatalf("status %q (execution %s %s: %s), want completed", out.Status, out.Execution.ID, out.Execution.State, out.Execution.Error)
	}
	s := out.Progress.Summary
	if s == nil {
		t.Fatal("completed run without a summary")
	}
	var sum int64
	for _, n := range s.Counts {
		sum += n
	}
	if sum != s.Due || s.Due != customers {
		t.Fatalf("summary counts %v add up to %d, due %d, customers %d", s.Counts, sum, s.Due, customers)
	}
	return s
}

// charges reads the period's charge records, by customer.
func charges(t *testing.T, dataDir string) map[string]billing.ChargeRecord {
	t.Helper()
	db := openStore(t, dataDir)
	records, err := billing.ListCharges(t.Context(), db, period)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]billing.ChargeRecord{}
	for _, r := range records {
		out[r.CustomerID] = r
	}
	return out
}

func openStore(t *testing.T, dataDir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(t.Context(), filepath.Join(dataDir, config.EmbeddedFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// waitFor polls cond (a condition on real state, not a guess about time)
// every 20 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// served is a billrun serve running on a data directory.
type served struct {
	// api is the base URL of its Executions API.
	api            string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	stopOnce       sync.Once
}

// startServe starts billrun serve on dataDir, with environment variables env
// (K=V) added, and returns once its Executions API is advertised; the test's
// end stops it.
func startServe(t *testing.T, dataDir string, env []string, args ...string) *served {
	t.Helper()
	s := &served{cmd: command(t.Context(), dataDir, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)}
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	var info struct {
		API string `json:"api"`
	}
	waitFor(t, 30*time.Second, "billrun serve to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dataDir, "server.json"))
		return err == nil && json.Unmarshal(b, &info) == nil
	})
	s.api = "http://" + info.API
	return s
}

// stop interrupts billrun serve, waits for its end and returns what it
// printed.
func (s *served) stop() result {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	})
	return result{stdout: s.stdout.String(), stderr: s.stderr.String(), code: s.cmd.ProcessState.ExitCode()}
}

// executionsPath is the billing workflow's executions in billrun serve's
// Executions API, which takes any project and location.
const executionsPath = "/v1/projects/billrun-local/locations/local/workflows/" + localstack.WorkflowID + "/executions"

// execution is an Execution in the Executions API's REST JSON.
type execution struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Argument string `json:"argument"`
	Result   string `json:"result"`
	Error    *struct {
		Payload string `json:"payload"`
		Context string `json:"context"`
	} `json:"error"`
}

// call sends a REST request (body as JSON, nil for none) to the Executions
// API and returns the response body, or an error unless it answered 200.
func (s *served) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, in)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b, nil
}

// startExecution starts a billing execution with a raw argument ("" for
// none), as Cloud Scheduler, Eventarc or gcloud workflows run --data would,
// and returns its name.
func (s *served) startExecution(ctx context.Context, argument string) (string, error) {
	b, err := s.call(ctx, http.MethodPost, executionsPath, map[string]string{"argument": argument})
	if err != nil {
		return "", err
	}
	var x execution
	if err := json.Unmarshal(b, &x); err != nil || x.Name == "" {
		return "", fmt.Errorf("start execution: %q (%v)", b, err)
	}
	return x.Name, nil
}

// awaitExecution polls the execution named name until it ends.
func (s *served) awaitExecution(t *testing.T, name string) execution {
	t.Helper()
	var x execution
	waitFor(t, commandTimeout, "execution "+name+" to end", func() bool {
		b, err := s.call(t.Context(), http.MethodGet, "/v1/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		x = execution{}
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		return x.State != "ACTIVE" && x.State != "QUEUED"
	})
	return x
}
