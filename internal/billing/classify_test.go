package billing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func TestClassifyError(t *testing.T) {
	stripeErr := func(status int, typ stripe.ErrorType, code, decline string) error {
		return fmt.Errorf("create: %w", &stripe.Error{HTTPStatusCode: status, Type: typ, Code: stripe.ErrorCode(code), DeclineCode: stripe.DeclineCode(decline), Msg: "m"})
	}
	// replayed is Stripe's stored answer to an earlier request under the key.
	replayed := func(status int, typ stripe.ErrorType, code, decline string) error {
		var se *stripe.Error
		err := stripeErr(status, typ, code, decline)
		errors.As(err, &se)
		se.LastResponse = &stripe.APIResponse{Header: http.Header{"Idempotent-Replayed": {"true"}}, StatusCode: status}
		return err
	}
	tests := []struct {
		name  string
		err   error
		kind  verdictKind
		state State
	}{
		{"declined", stripeErr(402, stripe.ErrorTypeCard, "card_declined", "insufficient_funds"), kindTerminal, StateDeclined},
		{"expired card", stripeErr(402, stripe.ErrorTypeCard, "expired_card", "expired_card"), kindTerminal, StateDeclined},
		{"authentication required (code)", stripeErr(402, stripe.ErrorTypeCard, "authentication_required", ""), kindTerminal, StateRequiresAction},
		{"authentication required (decline code)", stripeErr(402, stripe.ErrorTypeCard, "card_declined", "authentication_required"), kindTerminal, StateRequiresAction},
		{"key in use", stripeErr(409, stripe.ErrorTypeInvalidRequest, "idempotency_key_in_use", ""), kindRetry, ""},
		{"rate limited", stripeErr(429, stripe.ErrorTypeInvalidRequest, "rate_limit", ""), kindRateLimited, ""},
		{"lock timeout", stripeErr(429, stripe.ErrorTypeInvalidRequest, "lock_timeout", ""), kindRateLimited, ""},
		{"500", stripeErr(500, stripe.ErrorTypeAPI, "", ""), kindRetry, ""},
		// The first request under the key has finished: list now (Charge step 4).
		{"replayed 500", replayed(500, stripe.ErrorTypeAPI, "", ""), kindReconcile, ""},
		{"replayed decline", replayed(402, stripe.ErrorTypeCard, "card_declined", "generic_decline"), kindTerminal, StateDeclined},
		{"replayed idempotency mismatch", replayed(400, stripe.ErrorTypeIdempotency, "", ""), kindTerminal, StateHeldForReview},
		{"idempotency mismatch", stripeErr(400, stripe.ErrorTypeIdempotency, "", ""), kindTerminal, StateHeldForReview},
		{"no such customer", stripeErr(400, stripe.ErrorTypeInvalidRequest, "resource_missing", ""), kindTerminal, StateFailed},
		{"amount too small", stripeErr(400, stripe.ErrorTypeInvalidRequest, "amount_too_small", ""), kindTerminal, StateFailed},
		{"bad api key", stripeErr(401, stripe.ErrorTypeInvalidRequest, "", ""), kindConfig, ""},
		{"vault cap exceeded", stripeErr(402, stripe.ErrorTypeInvalidRequest, "vault_cap_exceeded", ""), kindTerminal, StateHeldForReview},
		{"vault budget exceeded", stripeErr(402, stripe.ErrorTypeInvalidRequest, "vault_budget_exceeded", ""), kindTerminal, StateHeldForReview},
		{"vault key expired", stripeErr(401, stripe.ErrorTypeInvalidRequest, "vault_key_expired", ""), kindRetry, ""},
		{"vault unknown key", stripeErr(401, stripe.ErrorTypeInvalidRequest, "vault_unknown_key", ""), kindBug, ""},
		{"vault endpoint not allowed", stripeErr(403, stripe.ErrorTypeInvalidRequest, "vault_endpoint_not_allowed", ""), kindBug, ""},
		{"timeout", context.DeadlineExceeded, kindRetry, ""},
		{"dropped connection", errors.New("EOF"), kindRetry, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := classifyError(tc.err)
			if v.kind != tc.kind || v.state != tc.state {
				t.Errorf("got kind %d state %q, want kind %d state %q", v.kind, v.state, tc.kind, tc.state)
			}
			if (v.kind == kindRetry || v.kind == kindRateLimited) && v.retryAfter <= 0 {
				t.Errorf("retryable verdict without Retry-After")
			}
		})
	}
}

// TestClassifyThroughStripeGo parses real answers (Stripe's and the vault
// proxy's error shape) with the real stripe-go client.
func TestClassifyThroughStripeGo(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		kind       verdictKind
		state      State
		wait       time.Duration
	}{
		{"vault cap", 402, `{"error":{"type":"invalid_request_error","code":"vault_cap_exceeded","message":"amount above the key's cap"}}`, "", kindTerminal, StateHeldForReview, 0},
		{"vault key expired", 401, `{"error":{"type":"invalid_request_error","code":"vault_key_expired","message":"key expired"}}`, "3", kindRetry, "", 3 * time.Second},
		{"vault endpoint", 403, `{"error":{"type":"invalid_request_error","code":"vault_endpoint_not_allowed","message":"no"}}`, "", kindBug, "", 0},
		{"card declined", 402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"lost_card","message":"declined"}}`, "", kindTerminal, StateDeclined, 0},
		{"rate limited with Retry-After", 429, `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"slow down"}}`, "7", kindRateLimited, "", 7 * time.Second},
		{"gateway html", 502, `<html>bad gateway</html>`, "", kindRetry, "", retryTransient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			client := NewStripeClient("sk_test_x", srv.URL, srv.Client())
			_, err := client.V1PaymentIntents.Create(context.Background(), createParams(ChargeRecord{
				Period: "2026-10", CustomerID: "c1", IdempotencyKey: "k", Amount: 100, Currency: "usd",
				StripeCustomerID: "cus_1", PaymentMethod: "pm_card_visa",
			}))
			if err == nil {
				t.Fatal("want an error")
			}
			v := classifyError(err)
			if v.kind != tc.kind || v.state != tc.state {
				t.Errorf("got kind %d state %q, want kind %d state %q (%v)", v.kind, v.state, tc.kind, tc.state, err)
			}
			if tc.wait != 0 && v.retryAfter != tc.wait {
				t.Errorf("retry after %s, want %s", v.retryAfter, tc.wait)
			}
		})
	}
}

func TestClassifyIntent(t *testing.T) {
	tests := []struct {
		status stripe.PaymentIntentStatus
		last   *stripe.Error
		kind   verdictKind
		state  State
	}{
		{stripe.PaymentIntentStatusSucceeded, nil, kindTerminal, StateSucceeded},
		{stripe.PaymentIntentStatusRequiresAction, nil, kindTerminal, StateRequiresAction},
		{stripe.PaymentIntentStatusRequiresPaymentMethod, &stripe.Error{Code: "card_declined", DeclineCode: "generic_decline"}, kindTerminal, StateDeclined},
		{stripe.PaymentIntentStatusRequiresPaymentMethod, &stripe.Error{Code: "authentication_required"}, kindTerminal, StateRequiresAction},
		{stripe.PaymentIntentStatusProcessing, nil, kindRetry, ""},
		{stripe.PaymentIntentStatusRequiresCapture, nil, kindTerminal, StateHeldForReview},
	}
	for _, tc := range tests {
		t.Run(string(tc.status), func(t *testing.T) {
			v := classifyIntent(&stripe.PaymentIntent{ID: "pi_1", Status: tc.status, LastPaymentError: tc.last})
			if v.kind != tc.kind || v.state != tc.state || v.paymentIntent != "pi_1" {
				t.Errorf("got %+v", v)
			}
		})
	}
}
