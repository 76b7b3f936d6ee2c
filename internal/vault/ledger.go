package vault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"billrun.dev/billrun/internal/store"
)

// maxChain bounds how many superseded generations settlement follows to reach a
// key's current generation; each renewal adds one.
const maxChain = 32

// ReplayWindow is how long after a reservation's first use a repeat of its
// request is forwarded as a replay: Stripe keeps idempotency keys 24 h, and
// the hour below that absorbs clocks that disagree (the vault's, Charge's,
// Stripe's). Past it, Stripe may answer the repeat as a new payment that the
// reservation does not count, so the proxy refuses it (ErrReservationStale).
// billing.DefaultStalePending, after which Charge reconciles a pending record
// before sending it again, is this same window.
const ReplayWindow = 23 * time.Hour

// charge is what the proxy read from a payment request.
type charge struct {
	IdempotencyKey string
	Customer       string // the Stripe customer id
	Currency       string
	Amount         int64
}

// readKey reads a key document, mapping "not found" onto ErrUnknownKey.
func readKey(ctx context.Context, r store.Reader, ref string) (keyRecord, error) {
	doc, err := r.Get(ctx, keyPath(ref))
	if errors.Is(err, store.ErrNotFound) {
		return keyRecord{}, fmt.Errorf("key %s: %w", ref, ErrUnknownKey)
	}
	if err != nil {
		return keyRecord{}, fmt.Errorf("read key %s: %w", ref, err)
	}
	return decodeKey(doc)
}

func readShard(ctx context.Context, r store.Reader, path string) (shardRecord, error) {
	doc, err := r.Get(ctx, path)
	if err != nil {
		return shardRecord{}, fmt.Errorf("read budget shard %s: %w", path, err)
	}
	return decodeShard(doc)
}

// authorize checks that credential opens k for endpoint at now.
func authorize(k keyRecord, credential, endpoint string, now time.Time) error {
	// A revoked key (superseded by a renewal, or revoked by an operator) reads
	// as unknown: its credential no longer opens anything.
	if !hashMatches(credential, k.SecretHash) || k.Revoked {
		return fmt.Errorf("key %s: %w", k.Ref, ErrUnknownKey)
	}
	if !now.Before(k.ExpiresAt) {
		return fmt.Errorf("key %s expired at %s: %w", k.Ref, k.ExpiresAt.Format(time.RFC3339), ErrKeyExpired)
	}
	if !k.allows(endpoint) {
		return fmt.Errorf("key %s, %s: %w", k.Ref, endpoint, ErrEndpointNotAllowed)
	}
	return nil
}

// reserve holds c's amount against the key's cap and its run budget shard, in
// one transaction. A replay of an idempotency key that is pending or committed
// reserves nothing more and is forwarded, within ReplayWindow of the
// reservation's first use (Stripe replays it: no new money, and the caller
// gets Stripe's own answer, PaymentIntent and all); after it, it is refused
// (ErrReservationStale). One that was released is reserved again, since it is
// about to be forwarded again, if the key has room for it (admits). It reports
// whether it reserved anything.
func reserve(ctx context.Context, tx store.Tx, ref, credential string, c charge, now time.Time) (bool, error) {
	k, err := readKey(ctx, tx, ref)
	if err != nil {
		return false, err
	}
	if err := authorize(k, credential, EndpointCreatePaymentIntent, now); err != nil {
		return false, err
	}
	if c.Customer != k.Stripe {
		return false, fmt.Errorf("key %s is for Stripe customer %s, request names %s: %w", ref, k.Stripe, c.Customer, ErrCustomerMismatch)
	}
	if c.Currency != k.Currency {
		return false, fmt.Errorf("key %s is for %s, request is in %s: %w", ref, k.Currency, c.Currency, ErrCurrencyMismatch)
	}
	shard, err := readShard(ctx, tx, k.BudgetShard)
	if err != nil {
		return false, err
	}

	field := reservationField(c.IdempotencyKey)
	r, seen := k.Reservations[field]
	if seen {
		if r.Amount != c.Amount {
			return false, fmt.Errorf("key %s: idempotency key %q was used for %d, now %d: %w", ref, c.IdempotencyKey, r.Amount, c.Amount, ErrIdempotencyKeyReused)
		}
		if r.State != stateReleased {
			// A live reservation's request is a replay for Stripe only while
			// Stripe keeps its key; later it would be a new payment, past the
			// cap that this reservation already used.
			if now.Sub(r.ReservedAt) >= ReplayWindow {
				return false, fmt.Errorf("key %s: idempotency key %q (%s) first sent at %s, %s or more ago: reconcile before sending it again: %w",
					ref, c.IdempotencyKey, r.State, r.ReservedAt.Format(time.RFC3339), ReplayWindow, ErrReservationStale)
			}
			return false, nil
		}
	}
	if err := k.admits(seen); err != nil {
		return false, err
	}
	// Written as subtractions so that no sum can overflow.
	if c.Amount > k.Cap-k.Spent-k.Reserved {
		return false, fmt.Errorf("key %s: %d %s does not fit in cap %d (spent %d, reserved %d): %w",
			ref, c.Amount, c.Currency, k.Cap, k.Spent, k.Reserved, ErrCapExceeded)
	}
	if c.Amount > shard.Budget-shard.Used {
		return false, fmt.Errorf("key %s: %d %s does not fit in run budget shard %s (budget %d, used %d): %w",
			ref, c.Amount, c.Currency, k.BudgetShard, shard.Budget, shard.Used, ErrBudgetExceeded)
	}

	k.Reservations[field] = reservation{IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, State: statePending, UpdatedAt: now, ReservedAt: now}
	if err := tx.Update(keyPath(ref), store.Data{
		"reserved":     k.Reserved + c.Amount,
		"reservations": k.reservationsData(),
	}); err != nil {
		return false, err
	}
	if err := tx.Update(k.BudgetShard, store.Data{"used": shard.Used + c.Amount}); err != nil {
		return false, err
	}
	return true, nil
}

// admits checks that k may carry one more live reservation: a new idempotency
// key, or a released one about to be forwarded again (again says which). Only
// live reservations (pending or committed: money that may have moved) use up
// the key's MaxCharges; a released one moved no money, so Charge may follow it
// with a new idempotency key after Stripe poisoned the old one with a stored
// 500. New keys after released ones are bounded too (MaxReleasedPerKey), so a
// loop of definite failures cannot mint keys, or grow the document, without
// end. The cap and the run budget bound the money either way.
func (k *keyRecord) admits(again bool) error {
	var live, released int64
	for _, r := range k.Reservations {
		if r.State == stateReleased {
			released++
		} else {
			live++
		}
	}
	switch {
	case live >= k.MaxCharges:
		return fmt.Errorf("key %s has carried its %d charge(s): %w", k.Ref, k.MaxCharges, ErrKeyUsed)
	case !again && released > MaxReleasedPerKey:
		return fmt.Errorf("key %s has had %d charges released, more than %d: %w", k.Ref, released, MaxReleasedPerKey, ErrKeyUsed)
	}
	return nil
}

// Outcome is what Stripe made of a forwarded payment request.
type Outcome int

const (
	// Succeeded: Stripe created the payment (2xx). The reservation is committed.
	Succeeded Outcome = iota + 1
	// Failed: Stripe refused it definitely (402 card error): no money moved. The
	// reservation is released.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// settle applies o to the reservation of idempotencyKey, on the key's current
// generation: a renewal carries reservations over, so a request forwarded on an
// old generation settles on its successor. It returns the resulting state.
func settle(ctx context.Context, tx store.Tx, ref, idempotencyKey string, o Outcome, now time.Time) (string, error) {
	k, err := current(ctx, tx, ref)
	if err != nil {
		return "", err
	}
	shard, err := readShard(ctx, tx, k.BudgetShard)
	if err != nil {
		return "", err
	}
	field := reservationField(idempotencyKey)
	r, ok := k.Reservations[field]
	if !ok {
		return "", fmt.Errorf("key %s: no reservation for idempotency key %q: %w", k.Ref, idempotencyKey, ErrInvalid)
	}

	spent, reserved, used := k.Spent, k.Reserved, shard.Used
	switch {
	case o == Succeeded && r.State == statePending:
		reserved -= r.Amount
		spent += r.Amount
		r.State = stateCommitted
	case o == Succeeded && r.State == stateReleased:
		// Only reconciliation can find a success behind a released reservation
		// (the proxy reserves again before it forwards a replay). Money moved, so
		// it is counted, even if that puts the key or the shard over its limit.
		spent += r.Amount
		used += r.Amount
		r.State = stateCommitted
	case o == Failed && r.State == statePending:
		reserved -= r.Amount
		used -= r.Amount
		r.State = stateReleased
	default:
		// Committed stays committed: a payment that happened is never un-counted.
		// Released stays released on a failure.
		return r.State, nil
	}
	r.UpdatedAt = now
	k.Reservations[field] = r
	if err := tx.Update(keyPath(k.Ref), store.Data{
		"spent":        spent,
		"reserved":     reserved,
		"reservations": k.reservationsData(),
	}); err != nil {
		return "", err
	}
	if used != shard.Used {
		if err := tx.Update(k.BudgetShard, store.Data{"used": used}); err != nil {
			return "", err
		}
	}
	return r.State, nil
}
