// Package billing is billrun's billing core: customers, runs and charges, and the
// protocol that makes "every customer charged exactly once per period" true. It is
// written once on top of store.Backend, so Firestore and the embedded store run
// the same logic, and talks to Stripe only through the vault (Vault): each
// charge's stripe-go client carries its own capped key's credential and points
// at the vault proxy, which alone holds the Stripe secret (I3, I5).
//
// Documents (DESIGN §3):
//
//	customers/{customerId}             what to charge and how
//	runs/{period}                      the run: lease, enumeration progress, summary
//	runs/{period}/charges/{customerId} the write-ahead charge record
//
// No document is written by every charge: run totals are aggregated from the
// charge records when the run is marked completed.
package billing

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
)

// State is a charge record's state.
type State string

// Charge states. Pending is the only non-terminal one.
const (
	// StatePending: the record exists (amount, currency and key fixed) and no
	// final answer is known yet; a retry is always safe.
	StatePending State = "pending"
	// StateSucceeded: Stripe took the payment.
	StateSucceeded State = "succeeded"
	// StateDeclined: the card was declined (the decline code says why).
	StateDeclined State = "declined"
	// StateRequiresAction: the bank wants the customer on-session.
	StateRequiresAction State = "requires_action"
	// StateHeldForReview: refused before or by Stripe for a reason a human must
	// look at (a cap or budget hit, an idempotency mismatch, an odd status).
	StateHeldForReview State = "held_for_review"
	// StateSkipped: nothing to charge (amount 0, inactive customer).
	StateSkipped State = "skipped"
	// StateFailed: a permanent problem with the customer's data.
	StateFailed State = "failed"
)

// TerminalStates lists every terminal state, in the order summaries show them.
var TerminalStates = []State{
	StateSucceeded, StateDeclined, StateRequiresAction, StateHeldForReview,
	StateSkipped, StateFailed,
}

// Terminal reports whether s is a final outcome.
func (s State) Terminal() bool {
	for _, t := range TerminalStates {
		if s == t {
			return true
		}
	}
	return false
}

// Sentinel errors; the api package maps them onto HTTP statuses.
var (
	// ErrInvalidInput: the request is malformed (a caller bug): answer 400.
	ErrInvalidInput = errors.New("invalid input")
	// ErrLeaseLost: the caller does not hold the run's lease: answer 409.
	ErrLeaseLost = errors.New("lease_lost")
	// ErrRunCompleted: the period is already completed and the request would
	// change it: answer 409.
	ErrRunCompleted = errors.New("run_completed")
	// ErrStripeConfig: Stripe refused our credentials or permissions; no retry
	// helps until an operator fixes the configuration: answer 500.
	ErrStripeConfig = errors.New("stripe configuration error")
	// ErrCorrupt: a stored document does not have the shape billrun writes.
	ErrCorrupt = errors.New("corrupt document")
)

// IncompleteError says why a run cannot be marked completed yet.
type IncompleteError struct {
	// Pending is the number of due customers known to lack a terminal outcome.
	Pending int64
	// Reason is a sentence for the operator.
	Reason string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("run not complete: %s (%d pending)", e.Reason, e.Pending)
}

// Defaults for Options.
const (
	// DefaultLease is how long a claim on a run lasts without progress.
	DefaultLease = 10 * time.Minute
	// DefaultStalePending is the age of a pending record's first Stripe attempt
	// after which Stripe may have forgotten its idempotency key (kept 24 h), so
	// the record is reconciled by listing before any new request. One hour of
	// margin covers clock skew and slow requests. It is the vault's
	// ReplayWindow, after which the proxy refuses such a request on its own
	// clock (vault_reservation_stale), which Charge answers the same way.
	DefaultStalePending = vault.ReplayWindow
	// DefaultAttemptWindow bounds one attempt's work after the caller may have
	// gone (the Stripe requests, then recording the answer), so a detached
	// attempt cannot outlive its function call by much.
	DefaultAttemptWindow = 40 * time.Second
	// StripeKeyWindow is how long Stripe keeps idempotency keys.
	StripeKeyWindow = 24 * time.Hour
	// DefaultPageSize is the due-customers page size when the caller gives 0.
	DefaultPageSize = 100
	// MaxPageSize bounds a page: one transaction writes one charge record per
	// customer plus the run, and the vault's key, index and budget shard
	// documents (vault.MaxPageSize), within Firestore's 500 writes.
	MaxPageSize = vault.MaxPageSize
)

// Options are the Service's optional settings; the zero value works.
type Options struct {
	// Lease is the run lease duration; 0 means DefaultLease.
	Lease time.Duration
	// StalePending is when a pending record must be reconciled before a new
	// Stripe request; 0 means DefaultStalePending. Must be below StripeKeyWindow.
	StalePending time.Duration
	// AttemptWindow bounds one Stripe attempt; 0 means DefaultAttemptWindow.
	// Keep it above the Stripe client's request timeout.
	AttemptWindow time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per decision; nil discards.
	Logger *slog.Logger
}

// Service runs billing operations on one store and one source of Stripe clients.
type Service struct {
	store         store.Backend
	vault         *Vault
	lease         time.Duration
	stalePending  time.Duration
	attemptWindow time.Duration
	now           func() time.Time
	log           *slog.Logger
	// working serialises charges of one record within this instance.
	working keyedLocks
}

// New returns a Service. v may be nil for a Service that never issues keys nor
// charges (for example an inspection tool); IssueVaultKeys and Charge then fail.
func New(b store.Backend, v *Vault, opts Options) *Service {
	s := &Service{
		store:         b,
		vault:         v,
		lease:         opts.Lease,
		stalePending:  opts.StalePending,
		attemptWindow: opts.AttemptWindow,
		now:           opts.Now,
		log:           opts.Logger,
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.stalePending <= 0 {
		s.stalePending = DefaultStalePending
	}
	if s.attemptWindow <= 0 {
		s.attemptWindow = DefaultAttemptWindow
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// clock returns the current time as the store keeps it (UTC, microseconds), so
// values compare equal after a round trip.
func (s *Service) clock() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// Document paths.
func customerPath(id string) string          { return "customers/" + id }
func runPath(period string) string           { return "runs/" + period }
func chargesCollection(period string) string { return "runs/" + period + "/charges" }
func chargePath(period, customerID string) string {
	return chargesCollection(period) + "/" + customerID
}

// customersCollection holds the customers.
const customersCollection = "customers"

// slogLevel picks a log level for a charge result: failures a human should see
// are warnings.
func slogLevel(r ChargeResult) slog.Level {
	if r.Permanent() || r.Outcome == OutcomeRetry {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
