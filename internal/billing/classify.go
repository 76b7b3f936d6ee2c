package billing

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/vault"
)

// verdictKind is what an answer from Stripe (or the vault proxy in front of it)
// means for the charge record and the caller.
type verdictKind int

const (
	// kindTerminal: record the verdict's state; the answer is final.
	kindTerminal verdictKind = iota
	// kindRetry: the request may or may not have happened; the record stays
	// pending and a retry with the same key is safe (503).
	kindRetry
	// kindRateLimited: like kindRetry, answered 429.
	kindRateLimited
	// kindBug: the request was wrong (an unknown vault key, a forbidden
	// endpoint): record the reason, stay pending, answer 400.
	kindBug
	// kindConfig: Stripe refused our credentials: stay pending, answer 500.
	kindConfig
	// kindReconcile: Stripe replayed an indeterminate answer (a stored 500)
	// under the key. The first request under it has finished, so the list
	// API says now whether it paid; a retry under the key would only get the
	// replay again, for 24 hours.
	kindReconcile
)

// verdict is one classified answer.
type verdict struct {
	kind  verdictKind
	state State // for kindTerminal
	// code is Stripe's (or the vault's) error code; declineCode the card's.
	code, declineCode string
	reason            string
	paymentIntent     string
	retryAfter        time.Duration
}

// Retry-After defaults, in the absence of a header from Stripe or the proxy.
const (
	retryKeyInUse  = 1 * time.Second
	retryRateLimit = 2 * time.Second
	retryTransient = 2 * time.Second
	maxRetryAfter  = 60 * time.Second
)

// codeDuplicatePayments: reconciliation found more than one successful
// PaymentIntent carrying the record's key.
const codeDuplicatePayments = "duplicate_payments"

// codeKeyRotationsExhausted: Stripe poisoned every key a charge may rotate to
// with a stored indeterminate answer, and no payment was made under any.
const codeKeyRotationsExhausted = "key_rotations_exhausted"

// codeKeyRotated: an answer came under a key that another call had retired
// meanwhile; it is not recorded and the caller retries under the new key.
const codeKeyRotated = "key_rotated"

// maxKeyRotations bounds how often a charge moves to a new idempotency key;
// the vault lets through exactly that many released keys besides the live one.
const maxKeyRotations = vault.MaxReleasedPerKey

// rotationsExhausted is the verdict on a charge whose every key Stripe
// answered with a stored 500, none of them paying (listing said so). A
// held_for_review, not a 503: retrying cannot help for 24 hours, the customer
// is recorded (so the run can complete, I2), and a person looks at why Stripe
// keeps failing this one request before it is sent again.
func rotationsExhausted(keys int64) verdict {
	return verdict{kind: kindTerminal, state: StateHeldForReview, code: codeKeyRotationsExhausted,
		reason: fmt.Sprintf("Stripe answered 500 under each of %d idempotency keys and no PaymentIntent carries any of them: "+
			"no payment was made; review before charging again", keys)}
}

// rotationReason is what the record keeps about a retired key.
func rotationReason(v verdict) string {
	return fmt.Sprintf("Stripe replays a stored indeterminate answer (%s: %s) under this key and no PaymentIntent carries it: "+
		"no payment was made; the charge continues under a new key", v.code, v.reason)
}

// classifyIntent reads a PaymentIntent that Stripe returned (or that
// reconciliation found).
func classifyIntent(pi *stripe.PaymentIntent) verdict {
	v := verdict{paymentIntent: pi.ID}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		v.state = StateSucceeded
	case stripe.PaymentIntentStatusRequiresAction:
		v.state, v.code, v.reason = StateRequiresAction, string(stripe.ErrorCodeAuthenticationRequired), "the bank requires the customer to authenticate"
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		v.state, v.reason = StateDeclined, "the payment failed"
		if e := pi.LastPaymentError; e != nil {
			v.code, v.declineCode, v.reason = string(e.Code), string(e.DeclineCode), e.Msg
			if isAuthRequired(e) {
				v.state = StateRequiresAction
			}
		}
	case stripe.PaymentIntentStatusProcessing:
		v.kind, v.reason, v.retryAfter = kindRetry, "the payment is still processing", retryTransient
	default:
		v.state, v.code, v.reason = StateHeldForReview, "unexpected_status", fmt.Sprintf("unexpected PaymentIntent status %q", pi.Status)
	}
	return v
}

// classifyError maps an error from stripe-go onto a verdict. It is the one place
// that knows Stripe's and the vault proxy's error vocabulary.
func classifyError(err error) verdict {
	var se *stripe.Error
	if !errors.As(err, &se) {
		// Timeouts, dropped connections, unparseable bodies: the request may have
		// reached Stripe. The same key makes the retry safe.
		return verdict{kind: kindRetry, code: "network_error", reason: "no answer from Stripe: " + err.Error(), retryAfter: retryTransient}
	}
	v := verdict{code: string(se.Code), declineCode: string(se.DeclineCode), reason: se.Msg}
	if se.PaymentIntent != nil {
		v.paymentIntent = se.PaymentIntent.ID
	}
	retryAfter := func(def time.Duration) time.Duration {
		if se.LastResponse != nil {
			if n, err := strconv.Atoi(se.LastResponse.Header.Get("Retry-After")); err == nil && n > 0 {
				return min(time.Duration(n)*time.Second, maxRetryAfter)
			}
		}
		return def
	}
	// The vault proxy answers in Stripe's error shape; its codes come first.
	if verr := vault.ErrorForCode(string(se.Code)); verr != nil {
		switch {
		case errors.Is(verr, vault.ErrCapExceeded), errors.Is(verr, vault.ErrBudgetExceeded), errors.Is(verr, vault.ErrKeyRevoked):
			// A cap, the run budget or an operator stopped it: a human decides.
			v.kind, v.state = kindTerminal, StateHeldForReview
		case errors.Is(verr, vault.ErrReservationStale):
			// The vault's clock finds the key's first use past Stripe's
			// window, whatever ours says: list first, as for a stale record.
			v.kind = kindReconcile
		case errors.Is(verr, vault.ErrKeyExpired), errors.Is(verr, vault.ErrUnavailable), errors.Is(verr, vault.ErrUpstream):
			// Renewed by Charge, or transient; an upstream failure may hide a
			// payment, which the same idempotency key replays.
			v.kind, v.retryAfter = kindRetry, retryAfter(retryTransient)
		default:
			// Unknown key, endpoint, customer, currency, reused or missing
			// idempotency key, malformed request: a bug in the caller.
			v.kind = kindBug
		}
		return v
	}
	// Stripe stores nothing for a 409 or a limiter's 429, so a replayed answer
	// that does not settle the outcome is a stored 500: see kindReconcile.
	replayed := se.LastResponse != nil && se.LastResponse.Header.Get("Idempotent-Replayed") == "true"
	switch {
	case replayed && (se.HTTPStatusCode >= 500 || se.Type == stripe.ErrorTypeAPI):
		v.kind = kindReconcile
	case se.Code == stripe.ErrorCodeIdempotencyKeyInUse || se.HTTPStatusCode == http.StatusConflict:
		v.kind, v.retryAfter = kindRetry, retryAfter(retryKeyInUse)
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		v.kind, v.retryAfter = kindRateLimited, retryAfter(retryRateLimit)
	case se.HTTPStatusCode >= 500 || se.Type == stripe.ErrorTypeAPI:
		v.kind, v.retryAfter = kindRetry, retryAfter(retryTransient)
	case se.Type == stripe.ErrorTypeCard && isAuthRequired(se):
		v.kind, v.state = kindTerminal, StateRequiresAction
	case se.Type == stripe.ErrorTypeCard:
		v.kind, v.state = kindTerminal, StateDeclined
	case se.Type == stripe.ErrorTypeIdempotency:
		// Our key was used with other parameters: a payment may exist under it.
		// A human decides; never a second request.
		v.kind, v.state = kindTerminal, StateHeldForReview
		if v.code == "" {
			v.code = string(stripe.ErrorTypeIdempotency)
		}
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		// Stripe's message may quote part of the key: keep it out of records and logs.
		v.kind, v.reason = kindConfig, fmt.Sprintf("Stripe refused the credentials (%d %s %s)", se.HTTPStatusCode, se.Type, se.Code)
	default:
		// invalid_request_error and other 4xx: Stripe refused this customer's
		// data (no such customer, detached payment method, bad currency, amount
		// too small). Permanent until the data changes.
		v.kind, v.state = kindTerminal, StateFailed
	}
	if v.code == "" {
		v.code = string(se.Type)
	}
	if v.reason == "" {
		v.reason = fmt.Sprintf("Stripe answered %d %s", se.HTTPStatusCode, se.Type)
	}
	return v
}

func isAuthRequired(e *stripe.Error) bool {
	return e.Code == stripe.ErrorCodeAuthenticationRequired ||
		e.DeclineCode == stripe.DeclineCode(stripe.ErrorCodeAuthenticationRequired)
}
