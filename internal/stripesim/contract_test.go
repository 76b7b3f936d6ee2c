package stripesim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// stripeMockVersion is the stripe-mock release the contract test runs.
const stripeMockVersion = "v0.203.0"

// contractCall is one of billrun's request shapes. ids carries ids that later
// calls need (customer, payment method, PaymentIntent, event).
type contractCall struct {
	name string
	do   func(ctx context.Context, c *stripe.Client, ids map[string]string) error
}

// contractCalls are the requests billrun makes, with the parameters it sends.
func contractCalls() []contractCall {
	return []contractCall{
		{"create customer", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			p := &stripe.CustomerCreateParams{Email: stripe.String("ada@example.com"), Name: stripe.String("Ada Lovelace")}
			p.AddMetadata("billrun_customer", "c-0001")
			p.SetIdempotencyKey("contract-customer-c-0001")
			cust, err := c.V1Customers.Create(ctx, p)
			if err == nil {
				ids["customer"] = cust.ID
			}
			return err
		}},
		{"attach payment method", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			pm, err := c.V1PaymentMethods.Attach(ctx, "pm_card_visa", &stripe.PaymentMethodAttachParams{Customer: stripe.String(ids["customer"])})
			if err == nil {
				ids["pm"] = pm.ID
			}
			return err
		}},
		{"set default payment method", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			_, err := c.V1Customers.Update(ctx, ids["customer"], &stripe.CustomerUpdateParams{
				InvoiceSettings: &stripe.CustomerUpdateInvoiceSettingsParams{DefaultPaymentMethod: stripe.String(ids["pm"])},
			})
			return err
		}},
		{"retrieve customer", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			_, err := c.V1Customers.Retrieve(ctx, ids["customer"], nil)
			return err
		}},
		{"off-session charge", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			p := chargeParams(ids["customer"], ids["pm"], "billrun/2026-10/c-0001/1999/usd", 1999)
			p.Description = stripe.String("billrun 2026-10")
			pi, err := c.V1PaymentIntents.Create(ctx, p)
			if err == nil {
				ids["pi"] = pi.ID
			}
			return err
		}},
		{"retrieve PaymentIntent", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			_, err := c.V1PaymentIntents.Retrieve(ctx, ids["pi"], nil)
			return err
		}},
		{"list PaymentIntents by customer", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			p := &stripe.PaymentIntentListParams{Customer: stripe.String(ids["customer"])}
			p.Limit = stripe.Int64(100)
			p.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: 1_700_000_000}
			p.Single = true
			return firstErr(c.V1PaymentIntents.List(ctx, p))
		}},
		{"search PaymentIntents by metadata", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			p := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{
				Query: "metadata['billrun_period']:'2026-10' AND metadata['billrun_customer']:'" + ids["customer"] + "'", Limit: stripe.Int64(10), Single: true}}
			return firstErr(c.V1PaymentIntents.Search(ctx, p))
		}},
		{"list undelivered events", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			p := &stripe.EventListParams{Types: stripe.StringSlice([]string{eventPISucceeded, eventPIFailed}), DeliverySuccess: stripe.Bool(false)}
			p.Limit = stripe.Int64(100)
			p.Single = true
			return firstErr(c.V1Events.List(ctx, p))
		}},
		{"list events since a cursor", func(ctx context.Context, c *stripe.Client, ids map[string]string) error {
			var last string
			for ev, err := range c.V1Events.List(ctx, &stripe.EventListParams{Type: stripe.String("payment_intent.*"), ListParams: stripe.ListParams{Single: true}}) {
				if err != nil {
					return err
				}
				last = ev.ID
			}
			if last == "" {
				return fmt.Errorf("no events")
			}
			p := &stripe.EventListParams{Type: stripe.String("payment_intent.succeeded")}
			p.EndingBefore = stripe.String(last)
			p.Single = true
			return firstErr(c.V1Events.List(ctx, p))
		}},
	}
}

func firstErr[T any](seq stripe.Seq2[T, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// runContract sends every call and a request with an unknown parameter, which
// a validating server must refuse.
func runContract(t *testing.T, client *stripe.Client) {
	ctx := context.Background()
	ids := map[string]string{}
	for _, call := range contractCalls() {
		if err := call.do(ctx, client, ids); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
	}
	p := chargeParams(ids["customer"], ids["pm"], "", 1999)
	p.AddExtra("colour", "red")
	_, err := client.V1PaymentIntents.Create(ctx, p)
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeInvalidRequest {
		t.Fatalf("unknown parameter: got %d %s", se.HTTPStatusCode, se.Type)
	}
}

func TestContractSimulator(t *testing.T) {
	s := newSim(t)
	runContract(t, s.client)
}

// TestContractStripeMock proves billrun's request shapes valid against
// Stripe's published OpenAPI spec, as served by stripe-mock, and checks that
// every field the simulator answers exists in Stripe's objects.
func TestContractStripeMock(t *testing.T) {
	base := startStripeMock(t)
	client := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(base), MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	t.Run("request shapes", func(t *testing.T) { runContract(t, client) })
	t.Run("response fields", func(t *testing.T) {
		s := newSim(t)
		cust, pm := s.customer("pm_card_visa")
		pi, err := s.charge(cust, pm, "k", 1000)
		if err != nil {
			t.Fatal(err)
		}
		var evID string
		for ev := range s.srv.st.events {
			evID = ev
		}
		for _, obj := range []struct{ simPath, mockPath string }{
			{"/v1/customers/" + cust, "/v1/customers/cus_123"},
			{"/v1/payment_methods/" + pm, "/v1/payment_methods/pm_123"},
			{"/v1/payment_intents/" + pi.ID, "/v1/payment_intents/pi_123"},
			{"/v1/events/" + evID, "/v1/events/evt_123"},
		} {
			_, simBody, _ := s.raw("GET", obj.simPath, testKey, nil, nil)
			mockBody := httpGet(t, base+obj.mockPath)
			var simObj, mockObj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(simBody), &simObj); err != nil {
				t.Fatalf("%s: %v", obj.simPath, err)
			}
			if err := json.Unmarshal(mockBody, &mockObj); err != nil {
				t.Fatalf("%s: %v", obj.mockPath, err)
			}
			for k := range simObj {
				if _, ok := mockObj[k]; !ok {
					t.Errorf("%s: field %q is not in Stripe's object", obj.mockPath, k)
				}
			}
		}
	})
}

// startStripeMock runs stripe-mock on free loopback ports for the test and
// returns its HTTP base URL.
func startStripeMock(t *testing.T) string {
	bin := stripeMockBinary(t)
	httpAddr, httpsAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-http-addr", httpAddr, "-https-addr", httpsAddr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Skipf("stripe-mock cannot start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	waitForTCP(t, httpAddr, 20*time.Second, &out)
	return "http://" + httpAddr
}

func httpGet(t *testing.T, url string) []byte {
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("sk_test_123", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

// stripeMockBinary finds stripe-mock ($STRIPE_MOCK, PATH, GOPATH/bin) or
// installs it with go install; it skips, saying why, when it cannot.
func stripeMockBinary(t *testing.T) string {
	if p := os.Getenv("STRIPE_MOCK"); p != "" {
		return p
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	gobin, err := exec.Command("go", "env", "GOBIN").Output()
	if err != nil {
		t.Skipf("stripe-mock not found and go env failed: %v", err)
	}
	dir := strings.TrimSpace(string(gobin))
	if dir == "" {
		gopath, _ := exec.Command("go", "env", "GOPATH").Output()
		dir = filepath.Join(strings.SplitN(strings.TrimSpace(string(gopath)), string(os.PathListSeparator), 2)[0], "bin")
	}
	bin := filepath.Join(dir, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("installing stripe-mock %s (about a minute, once)", stripeMockVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "go", "install", "github.com/stripe/stripe-mock@"+stripeMockVersion)
	if msg, err := install.CombinedOutput(); err != nil {
		t.Skipf("stripe-mock %s cannot be built (%v): %s", stripeMockVersion, err, truncate(string(msg), 2000))
	}
	return bin
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitForTCP(t *testing.T, addr string, within time.Duration, log *bytes.Buffer) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/v1/customers/cus_123")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("stripe-mock did not answer on %s within %v: %s", addr, within, log.String())
}
