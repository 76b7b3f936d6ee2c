package localstack

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	const (
		stripeKey = "sk_test_localstack_test"
		secret    = "localstack-test-signing-secret-0123456789abcdef"
	)
	s, err := Start(t.Context(), Config{DataDir: dir, Lease: 5 * time.Second, StripeKey: stripeKey, VaultSigningSecret: secret,
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

	// The functions read the stack's Stripe key and signing secret from the
	// process environment, as on Cloud Run.
	if os.Getenv("STRIPE_SECRET_KEY") != stripeKey || os.Getenv("BILLRUN_VAULT_SIGNING_SECRET") != secret {
		t.Error("the functions do not get the Stripe key and signing secret the stack was given")
	}

	if _, err := Start(t.Context(), Config{DataDir: t.TempDir(), VaultSigningSecret: secret}); err == nil || !strings.Contains(err.Error(), "one stack per process") {
		t.Errorf("second stack: %v, want refused", err)
	}
	if _, err := Start(t.Context(), Config{DataDir: t.TempDir(), StripeKey: "sk_live_not_for_the_simulator", VaultSigningSecret: secret}); err == nil ||
		!strings.Contains(err.Error(), "test-mode key") || strings.Contains(err.Error(), "not_for_the_simulator") {
		t.Errorf("a live Stripe key: %v, want refused without echoing it", err)
	}
}

// TestGeneratedSigningSecret: the generated secret lives outside the data
// directory, 0600, one per data directory however it is named, and processes
// generating it at once agree on one.
func TestGeneratedSigningSecret(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "secrets")
	dataDir := t.TempDir()
	const racers = 8
	got := make([]string, racers)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			var err error
			if got[i], err = generatedSigningSecret(secrets, dataDir); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, s := range got {
		if s != got[0] || len(s) < config.MinSigningSecretBytes {
			t.Fatalf("secrets %q, want one of at least %d bytes", got, config.MinSigningSecretBytes)
		}
	}
	t.Chdir(filepath.Dir(dataDir))
	if again, err := generatedSigningSecret(secrets, filepath.Base(dataDir)); err != nil || again != got[0] {
		t.Errorf("the same directory by a relative path: %q, %v; want the same secret", again, err)
	}
	if other, err := generatedSigningSecret(secrets, t.TempDir()); err != nil || other == got[0] {
		t.Errorf("another data directory: %q, %v; want a secret of its own", other, err)
	}
	files, err := os.ReadDir(secrets)
	if err != nil || len(files) != 2 {
		t.Fatalf("%s holds %v (%v), want one file per data directory", secrets, files, err)
	}
	for _, f := range files {
		if info, err := f.Info(); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", f.Name(), info.Mode(), err)
		}
	}
	if entries, err := os.ReadDir(dataDir); err != nil || len(entries) != 0 {
		t.Errorf("the data directory holds %v (%v), want nothing", entries, err)
	}
}
