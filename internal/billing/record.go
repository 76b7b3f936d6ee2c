package billing

import (
	"context"
	"fmt"
	"time"

	"billrun.dev/billrun/internal/store"
)

// ChargeRecord is runs/{Period}/charges/{CustomerID}: the write-ahead record of
// one customer's charge. It exists before the first Stripe request, and fixes
// what every attempt sends: amount, currency, key, Stripe customer and payment
// method. A changed customer is a new decision for a human, not a second payment.
type ChargeRecord struct {
	Period         string
	CustomerID     string
	IdempotencyKey string
	// KeyGeneration is what IdempotencyKey was derived with: 0, or the number
	// of rotations away from keys Stripe poisoned (RetiredKeys).
	KeyGeneration    int64
	RetiredKeys      []RetiredKey
	Amount           int64
	Currency         string
	StripeCustomerID string
	PaymentMethod    string
	State            State
	// Attempts counts the payment requests sent for this record through the
	// vault proxy, including any the proxy refused before Stripe (an expired
	// key renewed within the call).
	Attempts      int64
	PaymentIntent string
	ErrorCode     string
	DeclineCode   string
	Reason        string
	// KeyRef is the vault key reference of the latest attempt, if any.
	KeyRef    string
	CreatedAt time.Time
	UpdatedAt time.Time
	// WindowStart is when the key's current Stripe idempotency window began: the
	// first attempt, or the latest reconciliation that found no payment.
	WindowStart   time.Time
	LastAttemptAt time.Time
	SettledAt     time.Time
	// ReconciledAt is when a stale record was last reconciled by listing, and
	// Reconciliation what that found.
	ReconciledAt   time.Time
	Reconciliation string
}

// RetiredKey is an idempotency key the record used before a rotation, kept for
// audit: Stripe stored an indeterminate answer under it (a 500) and replays it
// for 24 hours, and listing showed no PaymentIntent carrying it.
type RetiredKey struct {
	IdempotencyKey string
	Reason         string
	RetiredAt      time.Time
}

// Retired key fields.
const (
	fRetiredKey    = "idempotency_key"
	fRetiredReason = "reason"
	fRetiredAt     = "retired_at"
)

func (k RetiredKey) data() map[string]any {
	return map[string]any{fRetiredKey: k.IdempotencyKey, fRetiredReason: k.Reason, fRetiredAt: k.RetiredAt.UTC()}
}

// Charge record fields.
const (
	fCustomerID    = "customer_id"
	fPeriod        = "period"
	fKey           = "idempotency_key"
	fKeyGeneration = "key_generation"
	fRetiredKeys   = "retired_keys"
	fAmount        = "amount"
	fState         = "state"
	fAttempts      = "attempts"
	fPaymentIntent = "payment_intent"
	fErrorCode     = "error_code"
	fDeclineCode   = "decline_code"
	fReason        = "reason"
	fKeyRef        = "key_ref"
	fCreatedAt     = "created_at"
	fUpdatedAt     = "updated_at"
	fWindowStart   = "key_window_start"
	fLastAttemptAt = "last_attempt_at"
	fSettledAt     = "settled_at"
	fReconciledAt  = "reconciled_at"
	fReconcileNote = "reconciliation"
)

// newRecord builds the record of a decision.
func newRecord(period string, c Customer, d Decision, now time.Time) ChargeRecord {
	r := ChargeRecord{
		Period:           period,
		CustomerID:       c.ID,
		Amount:           d.Amount,
		Currency:         d.Currency,
		StripeCustomerID: c.StripeCustomerID,
		PaymentMethod:    c.PaymentMethod,
		State:            d.State,
		ErrorCode:        d.ErrorCode,
		Reason:           d.Reason,
		CreatedAt:        now,
		UpdatedAt:        now,
	}
	if d.State == StatePending {
		r.IdempotencyKey = IdempotencyKey(PurposeCharge, period, c.ID, d.Amount, d.Currency, 0)
	} else {
		r.SettledAt = now
	}
	return r
}

// data encodes the record.
func (r ChargeRecord) data() store.Data {
	d := store.Data{
		fPeriod:         r.Period,
		fCustomerID:     r.CustomerID,
		fKey:            r.IdempotencyKey,
		fAmount:         r.Amount,
		fCurrency:       r.Currency,
		fStripeCustomer: r.StripeCustomerID,
		fPaymentMethod:  r.PaymentMethod,
		fState:          string(r.State),
		fAttempts:       r.Attempts,
		fPaymentIntent:  r.PaymentIntent,
		fErrorCode:      r.ErrorCode,
		fDeclineCode:    r.DeclineCode,
		fReason:         r.Reason,
		fKeyRef:         r.KeyRef,
		fReconcileNote:  r.Reconciliation,
	}
	// Absent until a first rotation, so records that never rotate keep their shape.
	if r.KeyGeneration > 0 {
		retired := make([]any, len(r.RetiredKeys))
		for i, k := range r.RetiredKeys {
			retired[i] = k.data()
		}
		d[fKeyGeneration], d[fRetiredKeys] = r.KeyGeneration, retired
	}
	setTime(d, fCreatedAt, r.CreatedAt)
	setTime(d, fUpdatedAt, r.UpdatedAt)
	setTime(d, fWindowStart, r.WindowStart)
	setTime(d, fLastAttemptAt, r.LastAttemptAt)
	setTime(d, fSettledAt, r.SettledAt)
	setTime(d, fReconciledAt, r.ReconciledAt)
	return d
}

// recordFrom decodes a charge record.
func recordFrom(doc store.Doc) (ChargeRecord, error) {
	f := &fields{path: doc.Path, data: doc.Data}
	r := ChargeRecord{
		Period:           f.str(fPeriod),
		CustomerID:       f.str(fCustomerID),
		IdempotencyKey:   f.str(fKey),
		Amount:           f.int(fAmount),
		Currency:         f.str(fCurrency),
		StripeCustomerID: f.str(fStripeCustomer),
		PaymentMethod:    f.str(fPaymentMethod),
		State:            State(f.str(fState)),
		Attempts:         f.int(fAttempts),
		PaymentIntent:    f.str(fPaymentIntent),
		ErrorCode:        f.str(fErrorCode),
		DeclineCode:      f.str(fDeclineCode),
		Reason:           f.str(fReason),
		KeyRef:           f.str(fKeyRef),
		CreatedAt:        f.time(fCreatedAt),
		UpdatedAt:        f.time(fUpdatedAt),
		WindowStart:      f.time(fWindowStart),
		LastAttemptAt:    f.time(fLastAttemptAt),
		SettledAt:        f.time(fSettledAt),
		ReconciledAt:     f.time(fReconciledAt),
		Reconciliation:   f.str(fReconcileNote),
		KeyGeneration:    f.int(fKeyGeneration),
	}
	for i, v := range f.list(fRetiredKeys) {
		m, ok := v.(map[string]any)
		if !ok {
			f.fail(fmt.Sprintf("%s[%d]", fRetiredKeys, i), v, "map")
			break
		}
		k := &fields{path: doc.Path, data: m}
		r.RetiredKeys = append(r.RetiredKeys, RetiredKey{
			IdempotencyKey: k.str(fRetiredKey), Reason: k.str(fRetiredReason), RetiredAt: k.time(fRetiredAt),
		})
		if k.err != nil && f.err == nil {
			f.err = k.err
		}
	}
	if f.err == nil && r.State != StatePending && !r.State.Terminal() {
		f.err = fmt.Errorf("%w: %s: unknown state %q", ErrCorrupt, doc.Path, r.State)
	}
	return r, f.err
}

// GetCharge reads one charge record; store.ErrNotFound if absent.
func GetCharge(ctx context.Context, r store.Reader, period, customerID string) (ChargeRecord, error) {
	doc, err := r.Get(ctx, chargePath(period, customerID))
	if err != nil {
		return ChargeRecord{}, fmt.Errorf("get charge %s/%s: %w", period, customerID, err)
	}
	return recordFrom(doc)
}

// ListCharges reads every charge record of a period, in customer-id order.
func ListCharges(ctx context.Context, r store.Reader, period string) ([]ChargeRecord, error) {
	docs, err := r.Query(ctx, store.Query{Collection: chargesCollection(period)})
	if err != nil {
		return nil, fmt.Errorf("list charges %s: %w", period, err)
	}
	out := make([]ChargeRecord, 0, len(docs))
	for _, d := range docs {
		rec, err := recordFrom(d)
		if err != nil {
			return nil, fmt.Errorf("list charges %s: %w", period, err)
		}
		out = append(out, rec)
	}
	return out, nil
}
