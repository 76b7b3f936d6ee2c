package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"billrun.dev/billrun/internal/api"
)

// TestLazyMisconfigured: a broken environment is answered 500 with every
// problem, never the key, and nothing is built.
func TestLazyMisconfigured(t *testing.T) {
	env := map[string]string{"BILLRUN_STORE": "cloudsql", "STRIPE_SECRET_KEY": "pk_live_not_a_secret_key", "BILLRUN_LOG_LEVEL": "error"}
	lazy := api.NewLazy(func(k string) string { return env[k] })
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
