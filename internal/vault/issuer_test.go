package vault_test

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/vault"
)

func newIssuer(t *testing.T, cfg vault.IssuerConfig) (*vault.Issuer, store.Backend) {
	t.Helper()
	db, err := embedded.Open(t.Context(), filepath.Join(t.TempDir(), "billrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg.Store, cfg.SigningSecret = db, []byte(strings.Repeat("s", 32))
	is, err := vault.NewIssuer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return is, db
}

func TestIssuePage_CapSources(t *testing.T) {
	is, _ := newIssuer(t, vault.IssuerConfig{HistoryMultiple: 2, DefaultCaps: map[string]int64{"usd": 7000}})
	tests := []struct {
		name       string
		req        vault.IssueRequest
		wantCap    int64
		wantSource string
		wantHeld   string
	}{
		{"ceiling wins over history", vault.IssueRequest{Currency: "usd", Amount: 100, Ceiling: 500, RecentPayments: []int64{9000}}, 500, vault.CapFromCeiling, ""},
		{"history: multiple of the largest recent payment", vault.IssueRequest{Currency: "usd", Amount: 100, RecentPayments: []int64{300, 1200, 800}}, 2400, vault.CapFromHistory, ""},
		{"default for the currency", vault.IssueRequest{Currency: "usd", Amount: 100}, 7000, vault.CapFromDefault, ""},
		{"no source for the currency", vault.IssueRequest{Currency: "eur", Amount: 100}, 0, "", vault.HoldNoCapSource},
		{"amount equal to the cap", vault.IssueRequest{Currency: "usd", Amount: 500, Ceiling: 500}, 500, vault.CapFromCeiling, ""},
		{"amount one above the cap", vault.IssueRequest{Currency: "usd", Amount: 501, Ceiling: 500}, 500, "", vault.HoldAmountAboveCap},
		{"tenfold amount against history", vault.IssueRequest{Currency: "usd", Amount: 12_000, RecentPayments: []int64{1200}}, 2400, "", vault.HoldAmountAboveCap},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Customer = "cus_" + string(rune('a'+i))
			got, err := is.IssuePage(t.Context(), period, []vault.IssueRequest{tc.req})
			if err != nil {
				t.Fatal(err)
			}
			g := got[0]
			if g.Cap != tc.wantCap || g.Reason != tc.wantHeld || g.Held != (tc.wantHeld != "") {
				t.Errorf("got cap %d held %v %q, want cap %d held %q", g.Cap, g.Held, g.Reason, tc.wantCap, tc.wantHeld)
			}
			if !g.Held && (g.CapSource != tc.wantSource || !strings.HasPrefix(g.KeyRef, "vk_") || g.Generation != 1) {
				t.Errorf("issued %+v, want source %s", g, tc.wantSource)
			}
		})
	}
}

func TestIssuePage_InvalidRequests(t *testing.T) {
	is, _ := newIssuer(t, vault.IssuerConfig{})
	ok := vault.IssueRequest{Customer: "cus_1", Currency: "usd", Amount: 100, Ceiling: 200}
	with := func(f func(*vault.IssueRequest)) []vault.IssueRequest {
		r := ok
		f(&r)
		return []vault.IssueRequest{r}
	}
	tests := []struct {
		name   string
		period string
		reqs   []vault.IssueRequest
	}{
		{"bad period", "2026-13", []vault.IssueRequest{ok}},
		{"customer twice", period, []vault.IssueRequest{ok, ok}},
		{"too many", period, make([]vault.IssueRequest, vault.MaxPageSize+1)},
		{"upper-case currency", period, with(func(r *vault.IssueRequest) { r.Currency = "USD" })},
		{"zero amount", period, with(func(r *vault.IssueRequest) { r.Amount = 0 })},
		{"negative ceiling", period, with(func(r *vault.IssueRequest) { r.Ceiling = -1 })},
		{"slash in customer", period, with(func(r *vault.IssueRequest) { r.Customer = "cus/1" })},
		{"empty customer", period, with(func(r *vault.IssueRequest) { r.Customer = "" })},
		{"negative recent payment", period, with(func(r *vault.IssueRequest) { r.RecentPayments = []int64{-5} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := is.IssuePage(t.Context(), tc.period, tc.reqs); !errors.Is(err, vault.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// TestIssuePage_Idempotent retries a page, concurrently and in another order:
// every customer keeps one key.
func TestIssuePage_Idempotent(t *testing.T) {
	is, db := newIssuer(t, vault.IssuerConfig{})
	var reqs []vault.IssueRequest
	for _, c := range []string{"cus_a", "cus_b", "cus_c", "cus_d"} {
		reqs = append(reqs, vault.IssueRequest{Customer: c, Currency: "usd", Amount: 100, Ceiling: 200})
	}
	results := make([][]vault.Issued, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			page := reqs
			if i%2 == 1 {
				page = []vault.IssueRequest{reqs[3], reqs[2], reqs[1], reqs[0]}
			}
			var err error
			if results[i], err = is.IssuePage(t.Context(), period, page); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	refs := map[string]string{}
	for _, res := range results {
		for _, r := range res {
			if prev, ok := refs[r.Customer]; ok && prev != r.KeyRef {
				t.Errorf("%s got %s and %s", r.Customer, prev, r.KeyRef)
			}
			refs[r.Customer] = r.KeyRef
		}
	}
	agg, err := db.Aggregate(t.Context(), store.Query{Collection: "vault_keys"})
	if err != nil || agg.Count != 4 {
		t.Errorf("%d key documents (%v), want 4", agg.Count, err)
	}
}

func TestNewIssuer_ReportsEveryProblem(t *testing.T) {
	_, err := vault.NewIssuer(vault.IssuerConfig{SigningSecret: []byte("short"), BudgetMarginPercent: 90, ShardSize: -1, DefaultCaps: map[string]int64{"USD": 5}})
	if !errors.Is(err, vault.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	for _, want := range []string{"Store is required", "SigningSecret", "BudgetMarginPercent", "ShardSize", `DefaultCaps["USD"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
}

func TestNewProxy_ReportsEveryProblem(t *testing.T) {
	_, err := vault.NewProxy(vault.ProxyConfig{StripeURL: "ftp://x", SigningSecret: []byte("short")})
	if !errors.Is(err, vault.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	for _, want := range []string{"Store is required", "StripeSecret is required", "SigningSecret", "StripeURL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
}

// TestCodes_RoundTrip: every refusal code maps back to its sentinel, so Charge
// can branch on errors.Is after reading stripe.Error.Code.
func TestCodes_RoundTrip(t *testing.T) {
	for _, err := range []error{
		vault.ErrUnknownKey, vault.ErrKeyExpired, vault.ErrKeyRevoked, vault.ErrEndpointNotAllowed, vault.ErrCustomerMismatch,
		vault.ErrCurrencyMismatch, vault.ErrCapExceeded, vault.ErrBudgetExceeded, vault.ErrKeyUsed, vault.ErrIdempotencyKeyRequired,
		vault.ErrIdempotencyKeyReused, vault.ErrBadRequest, vault.ErrBodyTooLarge, vault.ErrUpstream, vault.ErrUnavailable,
	} {
		code := vault.Code(err)
		if !strings.HasPrefix(code, "vault_") || !errors.Is(vault.ErrorForCode(code), err) {
			t.Errorf("%v: code %q does not map back", err, code)
		}
	}
	if vault.ErrorForCode("card_declined") != nil || vault.Code(errors.New("other")) != "" {
		t.Error("non-vault codes must map to nothing")
	}
}

func TestStaticSecret_NeverPrinted(t *testing.T) {
	s := vault.StaticSecret("sk_test_visible")
	cfg := vault.ProxyConfig{StripeSecret: s}
	for _, out := range []string{fmtAll(s), fmtAll(cfg)} {
		if strings.Contains(out, "sk_test_visible") {
			t.Errorf("printed: %s", out)
		}
	}
}

// fmtAll prints v every way a careless log line might.
func fmtAll(v any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %#v %s ", v, v, v, v)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("config", "v", v)
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "v", v)
	return b.String()
}
