package vault_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/vault"
)

// TestBadInputs_RefusedAndNothingChanged sends forged, truncated, foreign,
// superseded, revoked, expired and reused credentials, other endpoints, other
// currencies and customers, and malformed requests. Each is refused with its
// own 4xx code in Stripe's error shape, and neither the vault's documents nor
// Stripe's state change.
func TestBadInputs_RefusedAndNothingChanged(t *testing.T) {
	eachBackend(t, testBadInputs_RefusedAndNothingChanged)
}

func testBadInputs_RefusedAndNothingChanged(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{issuer: vault.IssuerConfig{KeyTTL: time.Hour}})
	ctx := t.Context()
	ids := e.customers(5)
	a, b, c, d, x := ids[0], ids[1], ids[2], ids[3], ids[4]
	var reqs []vault.IssueRequest
	for _, id := range ids {
		reqs = append(reqs, vault.IssueRequest{Customer: id, Currency: "usd", Amount: 1000, Ceiling: 2000})
	}
	first, err := e.issuer.IssuePage(ctx, period, reqs)
	if err != nil {
		t.Fatal(err)
	}
	paidA, err := e.charge(ctx, first[0].KeyRef, a, "usd", 1000, "charge-a")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(61 * time.Minute)
	// Renew a, b, c and d; x's key stays expired. Revoke c.
	renewed, err := e.issuer.IssuePage(ctx, period, reqs[:4])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.issuer.Revoke(ctx, renewed[2].KeyRef, "test"); err != nil {
		t.Fatal(err)
	}
	cred := func(i int) string { return vault.Credential(e.signing, renewed[i].KeyRef) }
	keyA, keyB := cred(0), cred(1)
	form := func(customer, currency string, amount int64) string { return chargeForm(customer, currency, amount) }
	post := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Idempotency-Key": {"k-1"}}
	with := func(h http.Header, k, v string) http.Header {
		out := h.Clone()
		if v == "" {
			out.Del(k)
		} else {
			out.Set(k, v)
		}
		return out
	}
	forged := renewed[1].KeyRef + "." + strings.Repeat("ab", 32)

	tests := []struct {
		name, method, path, credential string
		header                         http.Header
		body                           string
		status                         int
		code                           string
	}{
		{"no credential", "POST", "/v1/payment_intents", "", post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"forged MAC", "POST", "/v1/payment_intents", forged, post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"truncated", "POST", "/v1/payment_intents", keyB[:len(keyB)-1], post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"reference alone", "POST", "/v1/payment_intents", renewed[1].KeyRef, post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"signed with another secret", "POST", "/v1/payment_intents", vault.Credential([]byte(strings.Repeat("z", 32)), renewed[1].KeyRef), post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"the Stripe secret itself", "POST", "/v1/payment_intents", e.stripeSecret, post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"well signed, no such key", "POST", "/v1/payment_intents", vault.Credential(e.signing, "vk_"+strings.Repeat("0", 32)), post, form(b, "usd", 1000), 401, "vault_unknown_key"},
		{"superseded generation", "POST", "/v1/payment_intents", vault.Credential(e.signing, first[3].KeyRef), post, form(d, "usd", 1000), 401, "vault_unknown_key"},
		{"revoked", "POST", "/v1/payment_intents", cred(2), post, form(c, "usd", 1000), 401, "vault_unknown_key"},
		{"expired", "POST", "/v1/payment_intents", vault.Credential(e.signing, first[4].KeyRef), post, form(x, "usd", 1000), 401, "vault_key_expired"},
		{"reused for a second charge", "POST", "/v1/payment_intents", keyA, post, form(a, "usd", 500), 403, "vault_key_used"},
		{"idempotency key reused with another amount", "POST", "/v1/payment_intents", keyA, with(post, "Idempotency-Key", "charge-a"), form(a, "usd", 900), 400, "vault_idempotency_key_reused"},
		{"other currency", "POST", "/v1/payment_intents", keyB, post, form(b, "eur", 1000), 400, "vault_currency_mismatch"},
		{"other customer", "POST", "/v1/payment_intents", keyB, post, form(a, "usd", 1000), 403, "vault_customer_mismatch"},
		{"above cap", "POST", "/v1/payment_intents", keyB, post, form(b, "usd", 2001), 402, "vault_cap_exceeded"},
		{"no idempotency key", "POST", "/v1/payment_intents", keyB, with(post, "Idempotency-Key", ""), form(b, "usd", 1000), 400, "vault_idempotency_key_required"},
		{"oversized body", "POST", "/v1/payment_intents", keyB, post, form(b, "usd", 1000) + "&metadata[x]=" + strings.Repeat("y", 100_000), 413, "vault_body_too_large"},
		{"parameters in the query", "POST", "/v1/payment_intents?amount=99999", keyB, post, form(b, "usd", 1000), 400, "vault_bad_request"},
		{"JSON body", "POST", "/v1/payment_intents", keyB, with(post, "Content-Type", "application/json"), `{"amount":1000}`, 400, "vault_bad_request"},
		{"two amounts", "POST", "/v1/payment_intents", keyB, post, form(b, "usd", 1000) + "&amount=5", 400, "vault_bad_request"},
		{"zero amount", "POST", "/v1/payment_intents", keyB, post, form(b, "usd", 0), 400, "vault_bad_request"},
		{"negative amount", "POST", "/v1/payment_intents", keyB, post, form(b, "usd", -5), 400, "vault_bad_request"},
		{"connected account", "POST", "/v1/payment_intents", keyB, with(post, "Stripe-Account", "acct_1"), form(b, "usd", 1000), 403, "vault_endpoint_not_allowed"},
		{"refund", "POST", "/v1/refunds", keyB, post, "payment_intent=" + paidA.ID, 403, "vault_endpoint_not_allowed"},
		{"confirm", "POST", "/v1/payment_intents/" + paidA.ID + "/confirm", keyB, post, "", 403, "vault_endpoint_not_allowed"},
		{"update", "POST", "/v1/payment_intents/" + paidA.ID, keyA, post, "amount=1", 403, "vault_endpoint_not_allowed"},
		{"cancel", "DELETE", "/v1/payment_intents/" + paidA.ID, keyA, nil, "", 403, "vault_endpoint_not_allowed"},
		{"customer read", "GET", "/v1/customers/" + b, keyB, nil, "", 403, "vault_endpoint_not_allowed"},
		{"charges list", "GET", "/v1/charges", keyB, nil, "", 403, "vault_endpoint_not_allowed"},
		{"list another customer", "GET", "/v1/payment_intents?customer=" + a, keyB, nil, "", 403, "vault_customer_mismatch"},
		{"list without customer", "GET", "/v1/payment_intents", keyB, nil, "", 403, "vault_customer_mismatch"},
		{"read another customer's payment", "GET", "/v1/payment_intents/" + paidA.ID, keyB, nil, "", 403, "vault_customer_mismatch"},
	}

	beforeDocs := e.snapshot()
	beforeLedger := e.sim.Ledger()
	beforePosts := posts(e)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.raw(tc.method, tc.path, tc.credential, tc.header, tc.body)
			var got struct {
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%d %s: not Stripe's error shape: %v", status, body, err)
			}
			if status != tc.status || got.Error.Code != tc.code || got.Error.Type != "invalid_request_error" || got.Error.Message == "" {
				t.Errorf("got %d %+v, want %d %s", status, got.Error, tc.status, tc.code)
			}
		})
	}
	if after := e.snapshot(); !reflect.DeepEqual(beforeDocs, after) {
		t.Errorf("refusals changed the vault's documents")
	}
	if !reflect.DeepEqual(beforeLedger, e.sim.Ledger()) || posts(e) != beforePosts {
		t.Errorf("refusals reached Stripe: ledger %d→%d, POSTs %d→%d", len(beforeLedger), len(e.sim.Ledger()), beforePosts, posts(e))
	}

	// What a key may do besides paying: read its own customer's payments.
	got, err := e.client(renewed[0].KeyRef).V1PaymentIntents.Retrieve(ctx, paidA.ID, nil)
	if err != nil || got.ID != paidA.ID {
		t.Fatalf("reading the key's own payment: %v", err)
	}
	var listed int
	for pi, err := range e.client(renewed[0].KeyRef).V1PaymentIntents.List(ctx, &stripe.PaymentIntentListParams{Customer: stripe.String(a)}) {
		if err != nil {
			t.Fatal(err)
		}
		if pi.ID == paidA.ID {
			listed++
		}
	}
	if listed != 1 {
		t.Errorf("listing the key's customer found the payment %d times", listed)
	}
}

// posts counts the POSTs that reached the simulator.
func posts(e *env) int {
	n := 0
	for _, r := range e.sim.Requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// TestStripeCustomer_Enforced: a key is issued for billrun's customer id and
// bound to its Stripe customer id, which every request must name.
func TestStripeCustomer_Enforced(t *testing.T) { eachBackend(t, testStripeCustomer_Enforced) }

func testStripeCustomer_Enforced(t *testing.T, be backend) {
	e := newEnv(t, be, envOptions{})
	ctx := t.Context()
	ids := e.customers(2)
	req := vault.IssueRequest{Customer: "acct-42", StripeCustomer: ids[0], Currency: "usd", Amount: 1000, Ceiling: 2000}
	keys, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{req})
	if err != nil {
		t.Fatal(err)
	}
	if keys[0].Customer != "acct-42" {
		t.Fatalf("issued for %q", keys[0].Customer)
	}
	for _, other := range []string{ids[1], "acct-42"} {
		if _, err := e.charge(ctx, keys[0].KeyRef, other, "usd", 1000, "charge-"+other); vaultCode(err) != "vault_customer_mismatch" {
			t.Errorf("naming %s: %v, want vault_customer_mismatch", other, err)
		}
	}
	if _, err := e.charge(ctx, keys[0].KeyRef, ids[0], "usd", 1000, "charge-acct-42"); err != nil {
		t.Fatal(err)
	}
	if again, err := e.issuer.IssuePage(ctx, period, []vault.IssueRequest{req}); err != nil || again[0].KeyRef != keys[0].KeyRef {
		t.Errorf("retried page: %+v, %v", again, err)
	}
	if paid := e.paid(); paid[ids[0]] != 1000 || len(paid) != 1 {
		t.Errorf("paid %v", paid)
	}
}
