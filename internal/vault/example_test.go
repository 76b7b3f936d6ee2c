package vault_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// Example wires the vault as the functions will: IssueVaultKeys issues a page,
// VaultProxy serves at the root of its own URL, and Charge points stripe-go at
// it with the key's credential, then maps the proxy's refusals with
// ErrorForCode. The root matters: given a base URL with a path, stripe-go
// v82.5.1 sends the request and then fails reading the answer ("unknown path
// prefix", stripe.go Do), so a payment would happen behind an error.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vault-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := embedded.Open(ctx, filepath.Join(dir, "billrun.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	sim, err := stripesim.New(stripesim.Config{})
	if err != nil {
		panic(err)
	}
	stripeAPI := httptest.NewServer(sim)
	defer stripeAPI.Close()
	backends := func(url string) stripe.ClientOption {
		return stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			URL: stripe.String(url), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: quiet,
		}))
	}
	direct := stripe.NewClient("sk_test_example", backends(stripeAPI.URL))
	var customers []string
	for range 2 {
		c, err := direct.V1Customers.Create(ctx, &stripe.CustomerCreateParams{})
		if err != nil {
			panic(err)
		}
		customers = append(customers, c.ID)
	}

	// Held only by the functions (Secret Manager in the cloud).
	signing := []byte("example signing secret, 32 bytes or more")
	issuer, err := vault.NewIssuer(vault.IssuerConfig{Store: db, SigningSecret: signing})
	if err != nil {
		panic(err)
	}
	proxy, err := vault.NewProxy(vault.ProxyConfig{
		Store: db, StripeURL: stripeAPI.URL, StripeSecret: vault.StaticSecret("sk_test_example"), SigningSecret: signing,
	})
	if err != nil {
		panic(err)
	}
	vaultProxy := httptest.NewServer(proxy)
	defer vaultProxy.Close()

	// IssueVaultKeys: the second customer's amount is ten times its history.
	page, err := issuer.IssuePage(ctx, "2026-10", []vault.IssueRequest{
		{Customer: customers[0], Currency: "usd", Amount: 1200, RecentPayments: []int64{1000, 1200}},
		{Customer: customers[1], Currency: "usd", Amount: 12_000, RecentPayments: []int64{1000, 1200}},
	})
	if err != nil {
		panic(err)
	}
	for _, is := range page {
		if is.Held {
			fmt.Printf("held_for_review: %s\n", is.Reason)
		}
	}

	// Charge: stripe-go through the proxy; the workflow only ever saw KeyRef.
	charge := func(is vault.Issued, amount int64, idempotencyKey string) {
		sc := stripe.NewClient(vault.Credential(signing, is.KeyRef), backends(vaultProxy.URL))
		params := &stripe.PaymentIntentCreateParams{
			Amount: stripe.Int64(amount), Currency: stripe.String(is.Currency), Customer: stripe.String(is.Customer),
			PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
		}
		params.SetIdempotencyKey(idempotencyKey)
		pi, err := sc.V1PaymentIntents.Create(ctx, params)
		var se *stripe.Error
		switch {
		case err == nil:
			fmt.Printf("charged %d: %s\n", pi.Amount, pi.Status)
		case errors.As(err, &se) && errors.Is(vault.ErrorForCode(string(se.Code)), vault.ErrCapExceeded):
			fmt.Printf("refused by the vault (%s): held_for_review\n", se.Code)
		default:
			fmt.Println("error:", err)
		}
	}
	// A charge path that inflates the amount past the cap (3 × 1200) is
	// stopped before Stripe; the real amount goes through, and its retry is
	// Stripe's replay.
	charge(page[0], 12_000, "2026-10/"+customers[0]+"/inflated")
	charge(page[0], 1200, "2026-10/"+customers[0])
	charge(page[0], 1200, "2026-10/"+customers[0])
	ks, err := issuer.Key(ctx, page[0].KeyRef)
	if err != nil {
		panic(err)
	}
	fmt.Printf("key: cap %d (%s), spent %d\n", ks.Cap, ks.CapSource, ks.Spent)

	// Output:
	// held_for_review: amount_above_cap
	// refused by the vault (vault_cap_exceeded): held_for_review
	// charged 1200: succeeded
	// charged 1200: succeeded
	// key: cap 3600 (history), spent 1200
}
