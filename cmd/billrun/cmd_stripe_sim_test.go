package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"billrun.dev/billrun/internal/stripesim"
)

// stripeSimOutput is a goroutine-safe buffer for a running command's stdout.
type stripeSimOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *stripeSimOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *stripeSimOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// startStripeSim runs billrun stripe-sim on a free port and returns its URL
// and a stop function that waits for it to exit.
func startStripeSim(t *testing.T, getenv func(string) string, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &stripeSimOutput{}
	env := &cliEnv{stdout: out, stderr: out, getenv: getenv}
	done := make(chan error, 1)
	go func() {
		done <- realMain(ctx, env, append([]string{"stripe-sim", "--addr", "127.0.0.1:0"}, args...))
	}()
	re := regexp.MustCompile(`listening on (http://\S+)`)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], func() error {
				cancel()
				return <-done
			}
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("stripe-sim exited: %v: %s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("stripe-sim did not start: %s", out.String())
	return "", nil
}

func TestStripeSimCommandKeepsStateAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	charge := func(url string) *stripe.PaymentIntent {
		t.Helper()
		sc := stripe.NewClient("sk_test_cli", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			URL: stripe.String(url), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
		})))
		ctx := context.Background()
		cust, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Params: stripe.Params{IdempotencyKey: stripe.String("cust-1")}})
		if err != nil {
			t.Fatal(err)
		}
		p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd"), Customer: stripe.String(cust.ID),
			PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true)}
		p.SetIdempotencyKey("charge-1")
		pi, err := sc.V1PaymentIntents.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return pi
	}
	url, stop := startStripeSim(t, noEnv, "--data-dir", dir, "--seed", "3", "--faults", "latency=1ms")
	first := charge(url)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	url, stop = startStripeSim(t, noEnv, "--data-dir", dir)
	again := charge(url)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after restart: got %s, want replay of %s", again.ID, first.ID)
	}
	led, err := stripesim.ReadLedger(dir)
	if err != nil || len(led) != 1 || led[0].PaymentIntentID != first.ID {
		t.Fatalf("ledger: %v %+v", err, led)
	}
}

func noEnv(string) string { return "" }

func TestStripeSimCommandSendsSignedWebhooks(t *testing.T) {
	const secret = "whsec_cli_test"
	got := make(chan stripe.Event, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), secret)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- ev
	}))
	defer hook.Close()
	getenv := func(k string) string {
		if k == "STRIPE_WEBHOOK_SECRET" {
			return secret
		}
		return ""
	}
	url, stop := startStripeSim(t, getenv, "--data-dir", "", "--webhook-url", hook.URL)
	defer stop()
	sc := stripe.NewClient("sk_test_cli", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(url), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	_, err := sc.V1PaymentIntents.Create(context.Background(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(1000), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa_chargeDeclined"),
		Confirm: stripe.Bool(true), OffSession: stripe.Bool(true)})
	if err == nil {
		t.Fatal("want a decline")
	}
	select {
	case ev := <-got:
		if ev.Type != "payment_intent.payment_failed" {
			t.Fatalf("got %s", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook within 5 s")
	}
}

func TestStripeSimCommandBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad faults", []string{"--faults", "500-after=2,bogus=1"}, "bogus=1"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"webhook without secret", []string{"--webhook-url", "http://127.0.0.1:1/hook"}, "STRIPE_WEBHOOK_SECRET"},
		{"unknown flag", []string{"--colour", "red"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
			dir := t.TempDir()
			err := realMain(context.Background(), env, append([]string{"stripe-sim", "--data-dir", dir}, tc.args...))
			if !errors.Is(err, errUsage) || exitCode(env, err) != 2 {
				t.Fatalf("want a usage error, got %v", err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("output lacks %q: %s", tc.want, out.String())
			}
			if led, _ := stripesim.ReadLedger(dir); len(led) != 0 {
				t.Fatal("bad input changed state")
			}
		})
	}
}
