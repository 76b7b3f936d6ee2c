package functions_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/stripesim"

	_ "billrun.dev/billrun/functions"
)

// TestServedByFunctionsFramework serves the registered functions the way the
// local stack does (funcframework.Start, environment only), VaultProxy at the
// root of its own listener, and bills a period through the proxy.
func TestServedByFunctionsFramework(t *testing.T) {
	sim, err := stripesim.New(stripesim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	dataDir := t.TempDir()
	t.Setenv("FUNCTION_TARGET", "")
	t.Setenv("BILLRUN_STORE", "embedded")
	t.Setenv("BILLRUN_DATA_DIR", dataDir)
	t.Setenv("STRIPE_SECRET_KEY", "sk_test_functions")
	t.Setenv("BILLRUN_STRIPE_API_BASE", simSrv.URL)
	t.Setenv("BILLRUN_LOG_LEVEL", "warn")
	t.Setenv("BILLRUN_VAULT_SIGNING_SECRET", "functions test signing secret, 32 bytes+")
	t.Setenv("BILLRUN_VAULT_DEFAULT_CAPS", "usd=100000")
	proxy := httptest.NewServer(api.NewLazy(os.Getenv, io.Discard).Handler(api.NameVaultProxy))
	defer proxy.Close()
	t.Setenv("BILLRUN_VAULT_PROXY_URL", proxy.URL)

	// Seed one customer in the store file the functions will open.
	sc := billing.NewStripeClient("sk_test_seed", simSrv.URL, simSrv.Client())
	sCust, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(t.Context(), filepath.Join(dataDir, config.EmbeddedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = billing.PutCustomers(t.Context(), db, []billing.Customer{{ID: "c1", StripeCustomerID: sCust.ID, PaymentMethod: "pm_card_visa",
		Currency: "usd", AmountSource: billing.SourcePlan, PlanAmount: 2000, Active: true}})
	if err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	go funcframework.StartHostPort("127.0.0.1", strconv.Itoa(port)) // runs until the test binary exits
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	call := func(fn string, body map[string]any) (int, map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		var resp *http.Response
		for try := 0; ; try++ { // the server is starting
			resp, err = http.Post(base+"/"+fn, "application/json", bytes.NewReader(raw))
			if err == nil || try == 100 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		return resp.StatusCode, out
	}
	period := time.Now().UTC().AddDate(0, -1, 0).Format("2006-01")
	steps := []struct {
		fn     string
		body   map[string]any
		status int
		key    string
		want   any
	}{
		{"Preflight", map[string]any{"period": period, "execution_id": "e1"}, 200, "status", "claimed"},
		{"IssueVaultKeys", map[string]any{"period": period, "execution_id": "e1"}, 200, "done", true},
		{"Charge", map[string]any{"period": period, "customer_id": "c1"}, 200, "outcome", "charged"},
		{"MarkCompleted", map[string]any{"period": period, "execution_id": "e1"}, 200, "due", float64(1)},
		{"Preflight", map[string]any{"period": period, "execution_id": "e2"}, 200, "status", "already_billed"},
		{"Charge", map[string]any{"period": period, "customer_id": "c1", "amount": 1}, 400, "error", `request body: malformed JSON: json: unknown field "amount"`},
	}
	keyRef := ""
	for _, s := range steps {
		if s.fn == "Charge" && s.status == 200 {
			s.body["key_ref"] = keyRef
		}
		status, body := call(s.fn, s.body)
		if s.fn == "IssueVaultKeys" {
			if list, _ := body["customers"].([]any); len(list) == 1 {
				keyRef, _ = list[0].(map[string]any)["key_ref"].(string)
			}
		}
		if status != s.status || body[s.key] != s.want {
			t.Fatalf("%s: %d %v, want %d with %s=%v", s.fn, status, body, s.status, s.key, s.want)
		}
	}
	if n := len(sim.Ledger()); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}
