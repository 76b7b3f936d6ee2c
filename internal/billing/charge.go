package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v82"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
)

// ChargeRequest asks to charge one customer for one period. It carries no
// amount: the amount comes from the write-ahead record.
type ChargeRequest struct {
	Period     string
	CustomerID string
	// KeyRef is the vault key reference IssueVaultKeys gave for this charge;
	// required.
	KeyRef string
	// Execution is the execution that owns the run's lease, on whose behalf
	// the charge is made; optional. With it, Charge keeps the lease alive
	// (keepLease), so a page slower than the lease is not resumed by another
	// execution while it is still charging (I4, F15).
	Execution string
}

// Outcome is Charge's answer.
type Outcome string

// Outcomes. The first three are answered 200, Retry 503 or 429, the rest 422.
const (
	OutcomeCharged        Outcome = "charged"
	OutcomeAlreadyCharged Outcome = "already_charged"
	OutcomeSkipped        Outcome = "skipped"
	OutcomeDeclined       Outcome = "declined"
	OutcomeRequiresAction Outcome = "requires_action"
	OutcomeHeldForReview  Outcome = "held_for_review"
	OutcomeFailed         Outcome = "failed"
	// OutcomeRetry: no final answer yet; the record stays pending and the
	// attempt was counted. Retry after RetryAfter.
	OutcomeRetry Outcome = "retry"
)

// ChargeResult is what Charge did.
type ChargeResult struct {
	Outcome       Outcome
	CustomerID    string
	PaymentIntent string
	Amount        int64
	Currency      string
	Attempts      int64
	ErrorCode     string
	DeclineCode   string
	Reason        string
	// RetryAfter and RateLimited are set for OutcomeRetry.
	RetryAfter  time.Duration
	RateLimited bool
	// Reconciled is true when this call adopted a payment found by listing.
	Reconciled bool
}

// Permanent reports an outcome that is final for this customer and not a
// success (answered 422).
func (r ChargeResult) Permanent() bool {
	switch r.Outcome {
	case OutcomeDeclined, OutcomeRequiresAction, OutcomeHeldForReview, OutcomeFailed:
		return true
	}
	return false
}

// resultFrom describes a settled record; fresh says whether this call settled it.
func resultFrom(rec ChargeRecord, fresh bool) ChargeResult {
	r := ChargeResult{
		CustomerID: rec.CustomerID, PaymentIntent: rec.PaymentIntent, Amount: rec.Amount, Currency: rec.Currency,
		Attempts: rec.Attempts, ErrorCode: rec.ErrorCode, DeclineCode: rec.DeclineCode, Reason: rec.Reason,
	}
	switch rec.State {
	case StateSucceeded:
		r.Outcome = OutcomeAlreadyCharged
		if fresh {
			r.Outcome = OutcomeCharged
		}
	case StateSkipped:
		r.Outcome = OutcomeSkipped
	default:
		r.Outcome = Outcome(rec.State)
	}
	return r
}

// Charge runs the charge protocol for one (period, customer) (I1, I2):
//
//  1. In one transaction, read the record: a settled record is answered from the
//     store, without Stripe. Otherwise create it (amount, currency and key fixed
//     from the customer now) or reuse it, and count the attempt, before any
//     Stripe request.
//  2. A pending record whose key may have left Stripe's 24 h window (by our
//     clock, or the vault proxy's: vault_reservation_stale) is first
//     reconciled: list the customer's PaymentIntents and adopt one carrying the
//     key; only if none exists is the key's vault reservation released and a
//     new request made (the record says so).
//  3. Create the PaymentIntent (off-session, confirmed, with the record's key and
//     metadata), then settle the record from the answer. Answers that leave the
//     outcome unknown keep the record pending: a retry sends the same key.
//  4. Stripe stores a 500 under the key and replays it to every retry for 24 h.
//     A replayed 500 means the first request has finished, so it is reconciled
//     at once by listing, as in 2: a PaymentIntent carrying the key is adopted
//     and the vault reservation settled. Only if none does (no payment was
//     made) is the key rotated: the vault reservation is released, then the
//     record moves to the next key generation (keeping the old key and why)
//     and the request is made under the new key. After maxKeyRotations the
//     charge is held for review instead.
//
// Calls for one customer within one instance take turns; calls on different
// instances may overlap, and Stripe's idempotency (409 while the key is in
// flight, then replays) keeps them to one payment.
func (s *Service) Charge(ctx context.Context, req ChargeRequest) (ChargeResult, error) {
	now := s.clock()
	if err := ValidatePeriod(req.Period, now); err != nil {
		return ChargeResult{}, err
	}
	if err := ValidateCustomerID(req.CustomerID); err != nil {
		return ChargeResult{}, err
	}
	if err := validateKeyRef(req.KeyRef); err != nil {
		return ChargeResult{}, err
	}
	if req.Execution != "" {
		if err := ValidateExecutionID(req.Execution); err != nil {
			return ChargeResult{}, err
		}
	}
	if s.vault == nil || s.vault.proxyURL == "" {
		return ChargeResult{}, fmt.Errorf("charge: %w: no vault proxy configured", ErrStripeConfig)
	}
	s.keepLease(ctx, req.Period, req.Execution)
	// Calls for one customer in this instance take turns; a call that waited
	// usually finds the record settled by the one before it.
	waitCtx, cancelWait := context.WithTimeout(ctx, beginTimeout)
	unlock, err := s.working.lock(waitCtx, chargePath(req.Period, req.CustomerID))
	cancelWait()
	if err != nil {
		r := ChargeResult{Outcome: OutcomeRetry, CustomerID: req.CustomerID, ErrorCode: "attempt_in_flight",
			Reason: "another call for this customer is still at work", RetryAfter: time.Second}
		s.logResult(ctx, req, r)
		return r, nil
	}
	defer unlock()
	// Fast path without a transaction: repeated calls find the record settled
	// and need not contend for it.
	rec, err := GetCharge(ctx, s.store, req.Period, req.CustomerID)
	switch {
	case err == nil && rec.State.Terminal():
		r := resultFrom(rec, false)
		s.logResult(ctx, req, r)
		return r, nil
	case err != nil && !isNotFound(err):
		return ChargeResult{}, fmt.Errorf("charge: %w", err)
	}
	// The key comes before any attempt is counted, so that a key that cannot
	// be used leaves no attempt counted that never reached Stripe.
	ref, err := s.vault.usableKey(ctx, req, now)
	if errors.Is(err, vault.ErrKeyRevoked) {
		return s.holdRevoked(ctx, req, rec.Attempts, err)
	}
	if err != nil {
		return ChargeResult{}, fmt.Errorf("charge %s/%s: vault key: %w", req.Period, req.CustomerID, err)
	}
	req.KeyRef = ref
	client := s.vault.client(ref)
	reconciled, renewed := false, false
	for {
		step, err := s.beginAttempt(ctx, req, reconciled)
		if err != nil {
			return ChargeResult{}, fmt.Errorf("charge %s/%s: %w", req.Period, req.CustomerID, err)
		}
		if step.done != nil {
			s.logResult(ctx, req, *step.done)
			return *step.done, nil
		}
		step.mayRenew = !renewed
		res, next, err := s.attempt(ctx, client, req, step)
		switch next {
		case nextReconciled:
			reconciled = true
		case nextRotate:
			if res, done, err := s.rotate(ctx, req, step.rec, res.Reason); done || err != nil {
				return res, err
			}
		case nextRenew:
			// The key expired, or was renewed by another call, between the
			// check above and the proxy: renew once and try again, through
			// the next generation with the same cap (F16).
			renewed = true
			ref, err := s.vault.renew(ctx, req.KeyRef)
			if errors.Is(err, vault.ErrKeyRevoked) {
				return s.holdRevoked(ctx, req, step.rec.Attempts, err)
			}
			if err != nil {
				return ChargeResult{}, fmt.Errorf("charge %s/%s: renew vault key: %w", req.Period, req.CustomerID, err)
			}
			s.log.InfoContext(ctx, "vault key renewed", "period", req.Period, "customer", req.CustomerID, "old", req.KeyRef, "new", ref)
			req.KeyRef, client = ref, s.vault.client(ref)
		default:
			return res, err
		}
	}
}

// holdRevoked records held_for_review for a charge whose key an operator
// revoked: it is not sent again.
func (s *Service) holdRevoked(ctx context.Context, req ChargeRequest, attempts int64, cause error) (ChargeResult, error) {
	v := verdict{kind: kindTerminal, state: StateHeldForReview, code: vault.Code(vault.ErrKeyRevoked), reason: heldReason(cause.Error(), attempts)}
	return s.settle(ctx, req, "", v, false)
}

// heldReason is the reason recorded for a charge held for review without a
// Stripe answer (by Charge, or by a page at issuance). After earlier attempts
// a payment may exist (an answer lost before the hold) that nothing else will
// find: a held key cannot list it, and the vault reservation stays pending.
// So the reason, which billrun report shows, says so for the human who
// reviews it.
func heldReason(reason string, attempts int64) string {
	if attempts > 0 {
		reason += fmt.Sprintf("; %d earlier attempt(s): check Stripe for a payment before charging again", attempts)
	}
	return reason
}

// next says what Charge does after an attempt.
type next int

const (
	nextDone next = iota
	// nextReconciled: reconciliation found no payment; make a new attempt.
	nextReconciled
	// nextRenew: the proxy refused the key as expired or superseded; renew
	// it and make a new attempt.
	nextRenew
	// nextRotate: Stripe replayed a stored 500 under the key and no payment
	// carries it; rotate the key and make a new attempt.
	nextRotate
)

// attempt makes the Stripe requests of one attempt and settles the record. It
// runs detached from ctx's cancellation (a caller that gives up must not stop
// an answer from being recorded), within the attempt window. After a
// reconciliation that adopted a payment, it settles the key's reservation.
func (s *Service) attempt(ctx context.Context, client *stripe.Client, req ChargeRequest, step attemptStep) (ChargeResult, next, error) {
	detached := context.WithoutCancel(ctx)
	work, cancel := context.WithTimeout(detached, s.attemptWindow*3/4)
	defer cancel()
	var v verdict
	// stale: Stripe may have forgotten the key (our clock, or the vault's,
	// says its first use is past the window).
	stale := step.reconcile
	listNow := step.reconcile
	if !listNow {
		pi, err := client.V1PaymentIntents.Create(work, createParams(step.rec))
		switch {
		case err != nil && step.mayRenew && renewable(err):
			return ChargeResult{}, nextRenew, nil
		case err != nil:
			v = classifyError(err)
			stale = errors.Is(vault.ErrorForCode(v.code), vault.ErrReservationStale)
		default:
			v = classifyIntent(pi)
		}
		listNow = v.kind == kindReconcile
	}
	replay := v
	reconciled := false
	if listNow {
		found := false
		var err error
		v, found, err = s.reconcile(work, client, step.rec)
		switch {
		case err != nil:
			if step.mayRenew && renewable(err) {
				return ChargeResult{}, nextRenew, nil
			}
			v = reconcileFailed(err)
		case !found && stale:
			// Stripe may have forgotten the key: a new request under it is
			// new, so the vault must count it anew. Listing has shown that no
			// payment carries the key, so its reservation is released first.
			unlisted, err := s.releaseUnpaid(work, req, step.rec)
			if err != nil {
				return ChargeResult{}, nextDone, err
			}
			if !unlisted {
				return ChargeResult{}, nextReconciled, nil
			}
			v = verdict{kind: kindTerminal, state: StateHeldForReview, code: codeUnlistedPayment,
				reason: "the vault counts a payment under this key that listing does not find: check Stripe before charging again"}
		case !found:
			// Stripe remembers the key and replays its 500: only a new key helps.
			return ChargeResult{Reason: rotationReason(replay)}, nextRotate, nil
		default:
			reconciled = true
		}
	}
	settleCtx, cancelSettle := context.WithTimeout(detached, s.attemptWindow/4)
	defer cancelSettle()
	res, err := s.settle(settleCtx, req, step.rec.IdempotencyKey, v, reconciled)
	if err == nil && reconciled && v.kind == kindTerminal {
		s.settleReservation(settleCtx, req, step.rec, v)
	}
	return res, nextDone, err
}

// rotate moves a pending record whose key Stripe poisoned (it replays a stored
// 500, and listing found no PaymentIntent carrying the key: no payment was
// made) to its next key generation, so that a new request can be made (step 4
// of Charge); why says what Stripe answered. The key's vault reservation is
// released first: a new key gets through the vault only beside released ones,
// and released means no money moved, which listing has just shown. Released but not yet rotated is safe to
// leave: the next call gets the replay, lists, and rotates. done reports an
// answer for the caller: the record was settled meanwhile, or the rotations
// are exhausted and the charge is held for review. Two calls rotating at once
// derive the same new key, and only the first moves the record.
func (s *Service) rotate(ctx context.Context, req ChargeRequest, rec ChargeRecord, why string) (res ChargeResult, done bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.attemptWindow/4)
	defer cancel()
	if _, err := s.vault.issuer.Reconcile(ctx, req.KeyRef, rec.IdempotencyKey, vault.Failed); err != nil {
		return ChargeResult{}, true, fmt.Errorf("charge %s/%s: release the reservation of a poisoned key: %w", req.Period, req.CustomerID, err)
	}
	if rec.KeyGeneration >= maxKeyRotations {
		res, err := s.settle(ctx, req, rec.IdempotencyKey, rotationsExhausted(rec.KeyGeneration+1), false)
		return res, true, err
	}
	now := s.clock()
	path := chargePath(req.Period, req.CustomerID)
	err = s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		done = false
		doc, err := tx.Get(ctx, path)
		if err != nil {
			return err
		}
		cur, err := recordFrom(doc)
		if err != nil {
			return err
		}
		switch {
		case cur.State.Terminal():
			res, done = resultFrom(cur, false), true
			return nil
		case cur.KeyGeneration != rec.KeyGeneration:
			// Another call rotated it first; the next attempt uses its key.
			return nil
		}
		cur.RetiredKeys = append(cur.RetiredKeys, RetiredKey{IdempotencyKey: cur.IdempotencyKey, Reason: why, RetiredAt: now})
		cur.KeyGeneration++
		cur.IdempotencyKey = IdempotencyKey(PurposeCharge, cur.Period, cur.CustomerID, cur.Amount, cur.Currency, cur.KeyGeneration)
		// The new key's Stripe window begins with its first request, now.
		cur.WindowStart, cur.UpdatedAt = now, now
		return tx.Set(path, cur.data())
	})
	if err != nil {
		return ChargeResult{}, true, fmt.Errorf("charge %s/%s: rotate key: %w", req.Period, req.CustomerID, err)
	}
	if done {
		s.logResult(ctx, req, res)
	} else {
		s.log.InfoContext(ctx, "idempotency key rotated", "period", req.Period, "customer", req.CustomerID,
			"retired", rec.IdempotencyKey, "generation", rec.KeyGeneration+1)
	}
	return res, done, nil
}

// codeUnlistedPayment: the vault counts a payment under the record's key that
// listing the customer's PaymentIntents does not find.
const codeUnlistedPayment = "unlisted_payment"

// releaseUnpaid releases the vault reservation of rec's key after listing
// found no payment carrying it, so that the vault reserves, and counts against
// the cap, the new request about to be made under the key. A key without a
// reservation (no request under it got past the vault) has nothing to release.
// unlisted reports a reservation the vault holds as committed: a payment
// exists that listing did not find, so the charge is not sent again but held
// for a human.
func (s *Service) releaseUnpaid(ctx context.Context, req ChargeRequest, rec ChargeRecord) (unlisted bool, err error) {
	state, err := s.vault.issuer.Reconcile(ctx, req.KeyRef, rec.IdempotencyKey, vault.Failed)
	switch {
	case errors.Is(err, vault.ErrInvalid):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("charge %s/%s: release the reservation of an unpaid stale key: %w", req.Period, req.CustomerID, err)
	}
	return state == vault.ReservationCommitted, nil
}

// renewable reports the proxy refusing a key as expired, or as unknown (a
// reference superseded by a renewal): Charge renews it and tries again.
func renewable(err error) bool {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return false
	}
	verr := vault.ErrorForCode(string(se.Code))
	return errors.Is(verr, vault.ErrKeyExpired) || errors.Is(verr, vault.ErrUnknownKey)
}

// settleReservation tells the vault what reconciliation found (F11), so the
// key's reservation kept since the lost answer is committed or released. A
// failure only leaves the reservation counted against the cap and budget
// (the safe side): it is logged, and the charge's outcome stands.
func (s *Service) settleReservation(ctx context.Context, req ChargeRequest, rec ChargeRecord, v verdict) {
	o := vault.Failed
	if v.state == StateSucceeded || v.code == codeDuplicatePayments {
		o = vault.Succeeded
	}
	state, err := s.vault.issuer.Reconcile(ctx, req.KeyRef, rec.IdempotencyKey, o)
	if err != nil {
		s.log.WarnContext(ctx, "vault reservation not settled after reconciliation", "period", req.Period,
			"customer", req.CustomerID, "key", req.KeyRef, "error", err.Error())
		return
	}
	s.log.InfoContext(ctx, "vault reservation settled after reconciliation", "period", req.Period,
		"customer", req.CustomerID, "key", req.KeyRef, "reservation", state)
}

// attemptStep is what beginAttempt decided.
type attemptStep struct {
	// done is the answer when no Stripe request is needed.
	done *ChargeResult
	// reconcile asks for listing before any request.
	reconcile bool
	rec       ChargeRecord
	// mayRenew: a refusal of the key may be answered by renewing it.
	mayRenew bool
}

// beginTimeout bounds the transaction that begins an attempt. Under heavy
// contention for one record a store's retries can back off for minutes; a
// caller is better answered 503 and retrying later.
const beginTimeout = 10 * time.Second

// beginAttempt is step 1 of the protocol, in one transaction.
func (s *Service) beginAttempt(ctx context.Context, req ChargeRequest, reconciled bool) (attemptStep, error) {
	ctx, cancel := context.WithTimeout(ctx, beginTimeout)
	defer cancel()
	now := s.clock()
	var step attemptStep
	path := chargePath(req.Period, req.CustomerID)
	err := s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		step = attemptStep{}
		doc, err := tx.Get(ctx, path)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err == nil {
			rec, err := recordFrom(doc)
			if err != nil {
				return err
			}
			if rec.State.Terminal() {
				r := resultFrom(rec, false)
				step.done = &r
				return nil
			}
			if rec.Attempts > 0 && now.Sub(rec.WindowStart) >= s.stalePending {
				if !reconciled {
					step.reconcile, step.rec = true, rec
					return nil
				}
				rec.WindowStart, rec.ReconciledAt = now, now
				rec.Reconciliation = "no PaymentIntent carries this key: new request under the same key"
			}
			step.rec = countAttempt(rec, req.KeyRef, now)
			return tx.Set(path, step.rec.data())
		}
		// No record yet: Charge came before enumeration. Decide from the customer now.
		cdoc, err := tx.Get(ctx, customerPath(req.CustomerID))
		if isNotFound(err) {
			// Nothing to record against: the id names no customer.
			step.done = &ChargeResult{Outcome: OutcomeFailed, CustomerID: req.CustomerID,
				ErrorCode: "unknown_customer", Reason: "no customer with this id"}
			return nil
		}
		if err != nil {
			return err
		}
		rdoc, err := tx.Get(ctx, runPath(req.Period))
		if err != nil && !isNotFound(err) {
			return err
		}
		if err == nil {
			run, err := runFrom(rdoc)
			if err != nil {
				return err
			}
			if run.State == RunCompleted {
				return fmt.Errorf("%w: %s is completed and has no charge record for this customer", ErrRunCompleted, req.Period)
			}
		}
		c, d := decideDoc(cdoc, req.Period)
		rec := newRecord(req.Period, c, d, now)
		if rec.State.Terminal() {
			r := resultFrom(rec, true)
			step.done = &r
			return tx.Create(path, rec.data())
		}
		step.rec = countAttempt(rec, req.KeyRef, now)
		return tx.Create(path, step.rec.data())
	})
	return step, err
}

// countAttempt records that a Stripe request is about to be made.
func countAttempt(rec ChargeRecord, keyRef string, now time.Time) ChargeRecord {
	rec.Attempts++
	rec.LastAttemptAt, rec.UpdatedAt = now, now
	if rec.WindowStart.IsZero() {
		rec.WindowStart = now
	}
	if keyRef != "" {
		rec.KeyRef = keyRef
	}
	return rec
}

// Metadata keys on every PaymentIntent billrun creates; reconciliation matches them.
const (
	MetaPeriod   = "billrun_period"
	MetaCustomer = "billrun_customer"
	MetaKey      = "billrun_key"
)

func createParams(rec ChargeRecord) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(rec.Amount),
		Currency:      stripe.String(rec.Currency),
		Customer:      stripe.String(rec.StripeCustomerID),
		PaymentMethod: stripe.String(rec.PaymentMethod),
		OffSession:    stripe.Bool(true),
		Confirm:       stripe.Bool(true),
		Metadata: map[string]string{
			MetaPeriod:   rec.Period,
			MetaCustomer: rec.CustomerID,
			MetaKey:      rec.IdempotencyKey,
		},
	}
	p.SetIdempotencyKey(rec.IdempotencyKey)
	return p
}

// reconcile lists the customer's PaymentIntents (the list API: search lags
// writes) and returns the verdict of the one carrying the record's key.
func (s *Service) reconcile(ctx context.Context, client *stripe.Client, rec ChargeRecord) (verdict, bool, error) {
	params := &stripe.PaymentIntentListParams{Customer: stripe.String(rec.StripeCustomerID)}
	params.Limit = stripe.Int64(100)
	var matches []*stripe.PaymentIntent
	for pi, err := range client.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return verdict{}, false, err
		}
		md := pi.Metadata
		if md[MetaKey] == rec.IdempotencyKey && md[MetaPeriod] == rec.Period && md[MetaCustomer] == rec.CustomerID {
			matches = append(matches, pi)
		}
	}
	s.log.InfoContext(ctx, "reconciled stale pending charge", "period", rec.Period, "customer", rec.CustomerID,
		"attempts", rec.Attempts, "matches", len(matches))
	if len(matches) == 0 {
		return verdict{}, false, nil
	}
	var succeeded []*stripe.PaymentIntent
	for _, pi := range matches {
		if pi.Status == stripe.PaymentIntentStatusSucceeded {
			succeeded = append(succeeded, pi)
		}
	}
	switch {
	case len(succeeded) > 1:
		return verdict{state: StateHeldForReview, code: codeDuplicatePayments, paymentIntent: succeeded[0].ID,
			reason: fmt.Sprintf("%d successful PaymentIntents carry this key", len(succeeded))}, true, nil
	case len(succeeded) == 1:
		return classifyIntent(succeeded[0]), true, nil
	}
	latest := matches[0]
	for _, pi := range matches[1:] {
		if pi.Created > latest.Created {
			latest = pi
		}
	}
	return classifyIntent(latest), true, nil
}

// reconcileFailed classifies a failed listing. A listing cannot tell whether a
// payment exists, so a permanent refusal holds the charge for review instead of
// recording a customer outcome, and no new request is made.
func reconcileFailed(err error) verdict {
	v := classifyError(err)
	v.reason = "reconciliation: " + v.reason
	if v.kind == kindTerminal {
		v.state = StateHeldForReview
	}
	return v
}

// settle is step 3: record the verdict unless the record is already settled.
// key is the idempotency key the verdict was answered under ("" when none was
// sent). An answer under a key the record has meanwhile retired (a call that
// read the record just before another rotated it) says nothing about the
// current key and is not recorded: the caller retries under the current key.
// A success is recorded whatever the key, since the money has moved.
func (s *Service) settle(ctx context.Context, req ChargeRequest, key string, v verdict, reconciled bool) (ChargeResult, error) {
	now := s.clock()
	path := chargePath(req.Period, req.CustomerID)
	var res ChargeResult
	retired := false
	err := s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		retired = false
		doc, err := tx.Get(ctx, path)
		if err != nil {
			return err
		}
		rec, err := recordFrom(doc)
		if err != nil {
			return err
		}
		if rec.State.Terminal() {
			// A concurrent call settled it first; its answer stands.
			res = resultFrom(rec, false)
			return nil
		}
		if key != "" && key != rec.IdempotencyKey && v.state != StateSucceeded {
			res = resultFrom(rec, false)
			res.Outcome, res.RetryAfter, res.ErrorCode = OutcomeRetry, retryKeyInUse, codeKeyRotated
			res.Reason = "another call rotated the idempotency key meanwhile; retry under the new key"
			retired = true
			return nil
		}
		rec.UpdatedAt = now
		rec.ErrorCode, rec.DeclineCode, rec.Reason = v.code, v.declineCode, v.reason
		if v.paymentIntent != "" {
			rec.PaymentIntent = v.paymentIntent
		}
		if reconciled {
			rec.ReconciledAt = now
			rec.Reconciliation = "adopted " + v.paymentIntent
		}
		if v.kind == kindTerminal {
			rec.State, rec.SettledAt = v.state, now
			res = resultFrom(rec, true)
		} else {
			res = resultFrom(rec, false)
			res.Outcome, res.RetryAfter, res.RateLimited = OutcomeRetry, v.retryAfter, v.kind == kindRateLimited
		}
		res.Reconciled = reconciled
		return tx.Set(path, rec.data())
	})
	if err != nil {
		return ChargeResult{}, fmt.Errorf("charge %s/%s: settle: %w", req.Period, req.CustomerID, err)
	}
	s.logResult(ctx, req, res)
	if retired {
		return res, nil
	}
	switch v.kind {
	case kindBug:
		return ChargeResult{}, fmt.Errorf("charge %s/%s: %w: %s (%s)", req.Period, req.CustomerID, ErrInvalidInput, v.reason, v.code)
	case kindConfig:
		return ChargeResult{}, fmt.Errorf("charge %s/%s: %w: %s", req.Period, req.CustomerID, ErrStripeConfig, v.reason)
	}
	return res, nil
}

func (s *Service) logResult(ctx context.Context, req ChargeRequest, r ChargeResult) {
	level := slogLevel(r)
	s.log.Log(ctx, level, "charge", "period", req.Period, "customer", req.CustomerID, "outcome", string(r.Outcome),
		"attempts", r.Attempts, "payment_intent", r.PaymentIntent, "code", r.ErrorCode, "decline_code", r.DeclineCode,
		"reason", r.Reason, "reconciled", r.Reconciled)
}

// IsTransient reports a store error worth retrying (contention, unavailability).
func IsTransient(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable)
}
