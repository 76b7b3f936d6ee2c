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
			cfg.StripeKey, cfg.StripeTimeout = "sk_test_open", time.Second
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
