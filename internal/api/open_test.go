package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store/firestoredb/emulator"
)

// TestLazyMisconfigured: a broken environment is answered 500 with every
// problem, never the key, and nothing is built.
func TestLazyMisconfigured(t *testing.T) {
	env := map[string]string{"BILLRUN_STORE": "cloudsql", "STRIPE_SECRET_KEY": "pk_live_not_a_secret_key", "BILLRUN_LOG_LEVEL": "error"}
	lazy := api.NewLazy(func(k string) string { return env[k] }, io.Discard)
	srv := httptest.NewServer(lazy.Handler(api.NameCharge))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"period":"2026-10","customer_id":"c1"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(got, "BILLRUN_STORE") || !strings.Contains(got, "STRIPE_SECRET_KEY") {
		t.Errorf("got %d %s", resp.StatusCode, got)
	}
	if strings.Contains(got, "not_a_secret") {
		t.Errorf("answer echoes the key: %s", got)
	}
}

// TestOpen builds the handlers from configuration alone, for each store, and
// claims a run through them.
func TestOpen(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(t *testing.T) config.Config
	}{
		{"embedded", func(t *testing.T) config.Config {
			return config.Config{Store: config.StoreEmbedded, DataDir: filepath.Join(t.TempDir(), "data")}
		}},
		{"firestore", func(t *testing.T) config.Config {
			em := emulators.Get(t)
			t.Setenv(emulator.EnvHost, em.Host())
			return config.Config{Store: config.StoreFirestore, Project: em.NewProject(), Database: config.DefaultDatabase}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			cfg.StripeTimeout = time.Second
			h, closeStore, err := api.Open(t.Context(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			srv := httptest.NewServer(h.Mux())
			defer srv.Close()
			period := time.Now().UTC().Format("2006-01")
			resp, err := http.Post(srv.URL+"/Preflight", "application/json", strings.NewReader(`{"period":"`+period+`","execution_id":"e1"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"claimed"`) {
				t.Fatalf("preflight: %d %s", resp.StatusCode, raw)
			}
		})
	}
}

// TestOpenStoreFaults: BILLRUN_STORE_FAULTS wraps the store the functions
// use with faultstore, and is refused on Firestore even when the Config was
// built without Validate.
func TestOpenStoreFaults(t *testing.T) {
	cases := []struct {
		name   string
		store  string
		faults string
		// status is Preflight's answer; 0 means Open itself must fail.
		status int
	}{
		{"no faults", config.StoreEmbedded, "", http.StatusOK},
		{"run record unreadable", config.StoreEmbedded, "read_fail=runs", http.StatusServiceUnavailable},
		{"claim never committed", config.StoreEmbedded, "commit_fail=runs@1", http.StatusServiceUnavailable},
		{"claim committed, reply lost", config.StoreEmbedded, "seed=3,commit_lost=runs", http.StatusServiceUnavailable},
		{"refused on firestore", config.StoreFirestore, "commit_fail=runs", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Config{Store: tc.store, DataDir: filepath.Join(t.TempDir(), "data"), Project: "p",
				StoreFaults: tc.faults, StripeTimeout: time.Second}
			h, closeStore, err := api.Open(t.Context(), cfg, nil)
			if tc.status == 0 {
				if err == nil || !strings.Contains(err.Error(), "BILLRUN_STORE_FAULTS: fault injection needs the embedded store") {
					t.Fatalf("Open: %v, want refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			srv := httptest.NewServer(h.Mux())
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/Preflight", "application/json", strings.NewReader(`{"period":"2026-10","execution_id":"e1"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("preflight: %d %s, want %d", resp.StatusCode, raw, tc.status)
			}
		})
	}
}

// TestOpenPerFunctionRequirements: each function checks only its own
// settings. Charge runs with no Stripe secret at all; VaultProxy and Charge
// each refuse (500, naming the variable) without theirs, while the others
// work.
func TestOpenPerFunctionRequirements(t *testing.T) {
	secret := strings.Repeat("k", 32)
	cases := []struct {
		name string
		env  map[string]string
		// broken lists the functions answering 500 and the variable they name.
		broken map[string]string
	}{
		{"workflow functions without a Stripe secret", map[string]string{"BILLRUN_VAULT_SIGNING_SECRET": secret, "BILLRUN_VAULT_PROXY_URL": "http://127.0.0.1:9"},
			map[string]string{api.NameVaultProxy: "STRIPE_SECRET_KEY"}},
		{"proxy without Charge's proxy URL", map[string]string{"BILLRUN_VAULT_SIGNING_SECRET": secret, "STRIPE_SECRET_KEY": "sk_test_x"},
			map[string]string{api.NameCharge: "BILLRUN_VAULT_PROXY_URL"}},
		{"no vault at all", map[string]string{"STRIPE_SECRET_KEY": "sk_test_x"},
			map[string]string{api.NameCharge: "BILLRUN_VAULT_SIGNING_SECRET", api.NameIssueVaultKeys: "BILLRUN_VAULT_SIGNING_SECRET", api.NameVaultProxy: "BILLRUN_VAULT_SIGNING_SECRET"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["BILLRUN_DATA_DIR"] = t.TempDir()
			cfg, err := config.Load(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			h, closeStore, err := api.Open(t.Context(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			for name, handler := range h.ByName() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`)))
				want, broken := tc.broken[name]
				switch {
				case broken && (rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), want)):
					t.Errorf("%s: %d %s, want 500 naming %s", name, rec.Code, rec.Body, want)
				case !broken && rec.Code == http.StatusInternalServerError:
					t.Errorf("%s: %d %s, want it configured", name, rec.Code, rec.Body)
				}
			}
		})
	}
}
