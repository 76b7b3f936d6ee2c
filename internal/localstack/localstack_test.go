package localstack

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/sample"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/workflow"
)

// TestStackBillsAPeriod starts the one stack this test process may have,
// bills a small sample twice through the production YAML, and checks that a
// second stack is refused.
func TestStackBillsAPeriod(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(t.Context(), Config{DataDir: dir, Lease: 5 * time.Second,
		WorkflowEnv: map[string]string{"BILLRUN_PAGE_SIZE": "7", "BILLRUN_PAGES_PER_EXECUTION": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	db, err := embedded.Open(t.Context(), filepath.Join(dir, config.EmbeddedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const customers = 40
	sc := billing.NewStripeClient(StripeKey, s.SimURL, &http.Client{Timeout: 10 * time.Second})
	if err := sample.Store(t.Context(), db, sc, sample.Generate(customers, 3)); err != nil {
		t.Fatal(err)
	}

	run := func() map[string]any {
		x, err := s.StartRun("2026-10")
		if err != nil {
			t.Fatal(err)
		}
		x, err = s.Executions.Wait(t.Context(), x.ID)
		if err != nil || x.State != workflow.StateSucceeded {
			t.Fatalf("execution %v: %+v", err, x)
		}
		var result map[string]any
		if err := json.Unmarshal([]byte(x.Result), &result); err != nil {
			t.Fatal(err)
		}
		return result
	}
	first := run()
	if first["due"] != float64(customers) {
		t.Fatalf("first run: %v, want %d due", first, customers)
	}
	// 40 customers in pages of 7, two pages per segment: several child
	// executions.
	if children := len(s.Executions.List(WorkflowID)) - 1; children < 3 {
		t.Errorf("%d child executions, want the period split into segments", children)
	}
	if second := run(); second["status"] != string(billing.AlreadyBilled) {
		t.Fatalf("second run: %v, want already_billed", second)
	}
	if n := len(s.Sim.Ledger()); n == 0 || n >= customers {
		t.Errorf("%d payments for %d customers of a mixed sample", n, customers)
	}

	if _, err := Start(t.Context(), Config{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "one stack per process") {
		t.Errorf("second stack: %v, want refused", err)
	}
}
