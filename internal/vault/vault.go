// Package vault gives every charge of a billing run its own capped credential and
// enforces the caps in a proxy that stands between the charge path and Stripe, so
// that a bug in amounts, a runaway retry loop or a compromised charge path cannot
// move more money than the run intended (invariants I3 and I5, scenarios F2 and
// F16 of DESIGN.md).
//
// Issuance (Issuer.IssuePage, or IssueTx inside a caller's transaction: billing
// issues a page's keys in the transaction that writes its charge records)
// writes one live key per (period, customer) in
// vault_keys/{keyRef}, with a cap that comes from a source independent of the
// amount (the customer's ceiling, a multiple of recent payments, a configured
// default); vault_runs/{period}/customers/{customer} points to the customer's
// current key, which makes issuing idempotent, and budget shards under
// vault_runs/{period}/budget_shards bound what all keys of the run let through
// together. An expired key is renewed as a new generation that carries over
// its cap and what it spent or holds reserved. The workflow sees key
// references only; the usable credential is HMAC(signing secret, reference),
// which only the functions can compute, and the key document stores only its
// hash.
//
// The proxy (NewProxy) authenticates the credential, checks endpoint, customer,
// currency and expiry, reserves the amount against the key's cap and its budget
// shard in one transaction keyed by the request's Idempotency-Key, forwards the
// request to Stripe with the real secret, and settles the reservation from
// Stripe's answer. Both halves are written once on store.Backend.
package vault

import (
	"errors"
	"net/http"
)

// Sentinel errors. The proxy turns each refusal into a Stripe-shaped error whose
// code is Code(err); a caller holding such a code gets the sentinel back with
// ErrorForCode, so Charge can map it with errors.Is.
var (
	// ErrUnknownKey: no such key, or the credential is forged, truncated, or
	// belongs to a revoked or superseded key.
	ErrUnknownKey = errors.New("vault: unknown key")
	// ErrKeyExpired: the key's expiry has passed; Issuer.Renew issues its next
	// generation with the same cap and what it already spent carried over.
	ErrKeyExpired = errors.New("vault: key expired")
	// ErrKeyRevoked: an operator revoked the key; it is not renewed.
	ErrKeyRevoked = errors.New("vault: key revoked")
	// ErrEndpointNotAllowed: the key does not cover this method and path.
	ErrEndpointNotAllowed = errors.New("vault: endpoint not allowed")
	// ErrCustomerMismatch: the request names another customer than the key's.
	ErrCustomerMismatch = errors.New("vault: customer mismatch")
	// ErrCurrencyMismatch: the request's currency is not the key's.
	ErrCurrencyMismatch = errors.New("vault: currency mismatch")
	// ErrCapExceeded: the amount does not fit in what the key's cap has left.
	ErrCapExceeded = errors.New("vault: cap exceeded")
	// ErrBudgetExceeded: the amount does not fit in what the run's budget has left.
	ErrBudgetExceeded = errors.New("vault: run budget exceeded")
	// ErrKeyUsed: the key has already carried as many charges (distinct
	// idempotency keys) as it allows.
	ErrKeyUsed = errors.New("vault: key already used")
	// ErrIdempotencyKeyRequired: a payment request came without an Idempotency-Key.
	ErrIdempotencyKeyRequired = errors.New("vault: idempotency key required")
	// ErrIdempotencyKeyReused: the idempotency key was already used on this key
	// with another amount.
	ErrIdempotencyKeyReused = errors.New("vault: idempotency key reused with other parameters")
	// ErrReservationStale: a repeat of a request whose reservation is live
	// (committed, or pending with the outcome unknown) came ReplayWindow or
	// more after the reservation's first use. Stripe may have forgotten the
	// idempotency key, so forwarding it could make a new payment that the
	// reservation does not count; the caller reconciles first (lists the
	// customer's PaymentIntents) and, if no payment carries the key, releases
	// the reservation (Issuer.Reconcile, Failed) before sending it again.
	ErrReservationStale = errors.New("vault: reservation stale")
	// ErrBadRequest: the request cannot be parsed (amount, currency, customer).
	ErrBadRequest = errors.New("vault: bad request")
	// ErrBodyTooLarge: the request body exceeds the proxy's limit.
	ErrBodyTooLarge = errors.New("vault: request body too large")
	// ErrUpstream: Stripe could not be reached or the answer was lost; the
	// reservation is kept until a replay or Issuer.Reconcile settles it.
	ErrUpstream = errors.New("vault: stripe unreachable")
	// ErrUnavailable: the store could not be reached or stayed contended;
	// nothing was reserved or forwarded, the request may be retried.
	ErrUnavailable = errors.New("vault: unavailable")
	// ErrInvalid: an issuance request is malformed (a caller bug).
	ErrInvalid = errors.New("vault: invalid request")
)

// refusal ties a sentinel to its machine-readable code and HTTP status.
type refusal struct {
	err    error
	code   string
	status int
}

// refusals is the proxy's whole error vocabulary; codes are distinct so Charge can
// tell "held for review" (cap, budget) from "re-issue" (expired) from "bug".
var refusals = []refusal{
	{ErrUnknownKey, "vault_unknown_key", http.StatusUnauthorized},
	{ErrKeyExpired, "vault_key_expired", http.StatusUnauthorized},
	{ErrKeyRevoked, "vault_key_revoked", http.StatusUnauthorized},
	{ErrEndpointNotAllowed, "vault_endpoint_not_allowed", http.StatusForbidden},
	{ErrCustomerMismatch, "vault_customer_mismatch", http.StatusForbidden},
	{ErrKeyUsed, "vault_key_used", http.StatusForbidden},
	{ErrCurrencyMismatch, "vault_currency_mismatch", http.StatusBadRequest},
	{ErrCapExceeded, "vault_cap_exceeded", http.StatusPaymentRequired},
	{ErrBudgetExceeded, "vault_budget_exceeded", http.StatusPaymentRequired},
	{ErrReservationStale, "vault_reservation_stale", http.StatusConflict},
	{ErrIdempotencyKeyRequired, "vault_idempotency_key_required", http.StatusBadRequest},
	{ErrIdempotencyKeyReused, "vault_idempotency_key_reused", http.StatusBadRequest},
	{ErrBadRequest, "vault_bad_request", http.StatusBadRequest},
	{ErrBodyTooLarge, "vault_body_too_large", http.StatusRequestEntityTooLarge},
	{ErrUpstream, "vault_upstream_unavailable", http.StatusBadGateway},
	{ErrUnavailable, "vault_unavailable", http.StatusServiceUnavailable},
}

func lookupRefusal(err error) (refusal, bool) {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r, true
		}
	}
	return refusal{}, false
}

// Code returns the machine-readable code the proxy answers for err, or "" when
// err is not a vault refusal.
func Code(err error) string {
	r, _ := lookupRefusal(err)
	return r.code
}

// ErrorForCode returns the sentinel for a code found in a Stripe-shaped error
// answered by the proxy (stripe.Error.Code), or nil for any other code.
func ErrorForCode(code string) error {
	for _, r := range refusals {
		if r.code == code {
			return r.err
		}
	}
	return nil
}
