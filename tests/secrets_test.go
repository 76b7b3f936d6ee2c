package tests

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
)

// TestI5_NoSecretsInDataDirOrOutput bills a period with a Stripe key and a
// vault signing secret of its own (some customers paying, some declined, some
// held by their caps), then looks for them, and for the usable credential of
// every vault key issued, everywhere people look: what every command printed
// (the stack's logs at debug level included), every execution as the
// Executions API shows it (argument, result, error, step history), and every
// file of the data directory (store and its WAL, the simulator's journal,
// executions with their steps and logs), plus the configuration directory,
// where a secret given by the user must not be copied.
func TestI5_NoSecretsInDataDirOrOutput(t *testing.T) {
	dir := t.TempDir()
	const customers = 100
	stripeKey := "sk_test_i5_" + randomHex(t, 12)
	signingSecret := randomHex(t, 32)
	env := []string{"STRIPE_SECRET_KEY=" + stripeKey, "BILLRUN_VAULT_SIGNING_SECRET=" + signingSecret}

	// seen maps where something was printed or shown to its text.
	seen := map[string][]byte{}
	// Pages of 10, two per segment: child executions, whose arguments
	// carry segments, are scanned too.
	srv := startServe(t, dir, env, "--log-level", "debug", "--env", "BILLRUN_PAGE_SIZE=10", "--env", "BILLRUN_PAGES_PER_EXECUTION=2")
	commands := [][]string{
		{"demo", "--customers", "100", "--period", period, "--json"},
		{"run", "--period", period},
		{"status", "--period", period, "--json"},
		{"report", "--period", period, "--format", "json"},
		{"report", "--period", period},
		{"audit", "--period", period},
		{"customers", "list"},
	}
	for i, args := range commands {
		r := billrunEnv(t, dir, env, args...).mustSucceed(t, args[0])
		what := "billrun " + strings.Join(args, " ")
		seen[what+": stdout"], seen[what+": stderr"] = []byte(r.stdout), []byte(r.stderr)
		if i > 0 {
			continue
		}
		var out runOutcome
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("demo --json: %v\n%s", err, r.stdout)
		}
		s := assertCompleted(t, out, customers)
		for _, st := range []billing.State{billing.StateSucceeded, billing.StateDeclined, billing.StateHeldForReview} {
			if s.Counts[string(st)] == 0 {
				t.Errorf("no customer %s: %v; the scan would miss that path", st, s.Counts)
			}
		}
	}
	assertOnce(t, dir)

	var list struct {
		Executions []execution `json:"executions"`
	}
	b, err := srv.call(t.Context(), http.MethodGet, executionsPath+"?view=FULL&pageSize=1000", nil)
	if err != nil || json.Unmarshal(b, &list) != nil || len(list.Executions) < 2 {
		t.Fatalf("list executions: %d (%v)\n%s", len(list.Executions), err, b)
	}
	seen["executions list"] = b
	for _, x := range list.Executions {
		for _, path := range []string{"/v1/" + x.Name + "?view=FULL", "/v1/" + x.Name + "/stepEntries?pageSize=1000"} {
			b, err := srv.call(t.Context(), http.MethodGet, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			seen[path] = b
		}
	}
	r := srv.stop()
	if r.stderr == "" {
		t.Fatal("billrun serve logged nothing at debug level: no log line to scan")
	}
	seen["serve stdout"], seen["serve stderr"] = []byte(r.stdout), []byte(r.stderr)
	for name, root := range map[string]string{"data directory": dir, "configuration directory": configHome} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			seen[name+" "+path] = b
			return err
		})
		if err != nil && !(root == configHome && errors.Is(err, fs.ErrNotExist)) {
			t.Fatal(err)
		}
	}

	secrets := map[string]string{"STRIPE_SECRET_KEY": stripeKey, "the vault signing secret": signingSecret}
	keys, err := openStore(t, dir).Query(t.Context(), store.Query{Collection: "vault_keys"})
	if err != nil || len(keys) == 0 {
		t.Fatalf("%d vault keys (%v), want the run's", len(keys), err)
	}
	for _, k := range keys {
		cred := vault.Credential([]byte(signingSecret), k.ID())
		// The stack issued the key with our signing secret, so cred is the
		// credential that would spend it.
		if sum := sha256.Sum256([]byte(cred)); k.Data["secret_hash"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("vault key %s was not issued with BILLRUN_VAULT_SIGNING_SECRET", k.ID())
		}
		secrets["the credential of vault key "+k.ID()] = cred
	}
	// A secret is looked for as it is, and as the store, JSON and URLs would
	// encode it.
	for what, secret := range secrets {
		forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
		for where, text := range seen {
			for _, form := range forms {
				if bytes.Contains(text, []byte(form)) {
					t.Errorf("%s appears in %s", what, where)
					break
				}
			}
		}
	}
	t.Logf("looked for %d secrets in %d outputs, API responses and files", len(secrets), len(seen))
}

// randomHex is n random bytes in hex: a secret no other run shares.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
