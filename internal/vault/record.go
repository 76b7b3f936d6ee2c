package vault

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"billrun.dev/billrun/internal/store"
)

// Collections. Key documents live at the top level so the proxy finds a key by
// its reference alone; everything per run lives under vault_runs/{period}.
const (
	keysCollection = "vault_keys"
	runsCollection = "vault_runs"
)

func keyPath(ref string) string { return keysCollection + "/" + ref }

func indexCollection(period string) string {
	return runsCollection + "/" + period + "/customers"
}

func indexPath(period, customer string) string {
	return indexCollection(period) + "/" + customer
}

func shardCollection(period string) string {
	return runsCollection + "/" + period + "/budget_shards"
}

// Endpoints a key may call. Creating a PaymentIntent spends; the two reads let
// Charge reconcile (F11) through the proxy, restricted to the key's customer.
const (
	EndpointCreatePaymentIntent = "POST /v1/payment_intents"
	EndpointGetPaymentIntent    = "GET /v1/payment_intents/{id}"
	EndpointListPaymentIntents  = "GET /v1/payment_intents"
)

// Reservation states.
const (
	statePending   = "pending"   // forwarded, or about to be; counts in reserved
	stateCommitted = "committed" // Stripe answered success; counts in spent
	stateReleased  = "released"  // Stripe answered a definite failure; counts nowhere
)

// ReservationCommitted is the state Issuer.Reconcile returns for a
// reservation whose payment the vault counts as made.
const ReservationCommitted = stateCommitted

// reservation is one charge on a key, keyed by its Stripe idempotency key.
type reservation struct {
	IdempotencyKey string
	Amount         int64
	State          string
	UpdatedAt      time.Time
	// ReservedAt is when the reservation was last made pending, just before
	// its request was first forwarded: the start of Stripe's window for the
	// idempotency key (ReplayWindow). A released one reserved again starts
	// anew, since it is forwarded again.
	ReservedAt time.Time
}

// keyRecord is a vault_keys document.
type keyRecord struct {
	Ref          string
	Period       string
	Customer     string // billrun's customer id
	Stripe       string // the Stripe customer id every request must name
	Currency     string
	Amount       int64 // expected amount at issuance, for the record
	Cap          int64
	CapSource    string
	Spent        int64
	Reserved     int64
	MaxCharges   int64
	Reservations map[string]reservation // by reservationField(idempotency key)
	Endpoints    []string
	ExpiresAt    time.Time
	Generation   int64
	Revoked      bool
	RevokeReason string
	SupersededBy string
	Supersedes   string
	SecretHash   string
	BudgetShard  string // document path of the run budget shard it draws on
	CreatedAt    time.Time
}

// reservationField names a reservation inside the document. A hash, because an
// idempotency key may be any string up to 255 characters, and Firestore map
// keys may not be empty or look like __reserved__.
func reservationField(idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return "r_" + hex.EncodeToString(sum[:16])
}

func (k *keyRecord) allows(endpoint string) bool {
	for _, e := range k.Endpoints {
		if e == endpoint {
			return true
		}
	}
	return false
}

func (k *keyRecord) reservationsData() map[string]any {
	res := make(map[string]any, len(k.Reservations))
	for f, r := range k.Reservations {
		res[f] = map[string]any{
			"idempotency_key": r.IdempotencyKey,
			"amount":          r.Amount,
			"state":           r.State,
			"updated_at":      r.UpdatedAt,
			"reserved_at":     r.ReservedAt,
		}
	}
	return res
}

func (k *keyRecord) data() store.Data {
	eps := make([]any, len(k.Endpoints))
	for i, e := range k.Endpoints {
		eps[i] = e
	}
	return store.Data{
		"period":          k.Period,
		"customer":        k.Customer,
		"stripe_customer": k.Stripe,
		"currency":        k.Currency,
		"amount":          k.Amount,
		"cap":             k.Cap,
		"cap_source":      k.CapSource,
		"spent":           k.Spent,
		"reserved":        k.Reserved,
		"max_charges":     k.MaxCharges,
		"reservations":    k.reservationsData(),
		"endpoints":       eps,
		"expires_at":      k.ExpiresAt,
		"generation":      k.Generation,
		"revoked":         k.Revoked,
		"revoke_reason":   k.RevokeReason,
		"superseded_by":   k.SupersededBy,
		"supersedes":      k.Supersedes,
		"secret_hash":     k.SecretHash,
		"budget_shard":    k.BudgetShard,
		"created_at":      k.CreatedAt,
	}
}

// decodeKey reads a vault_keys document. A document that does not have the
// expected shape is an error rather than zero values, so a damaged record can
// never read as "no spend so far".
func decodeKey(doc store.Doc) (keyRecord, error) {
	d := fieldReader{data: doc.Data}
	k := keyRecord{
		Ref:          doc.ID(),
		Period:       d.str("period"),
		Customer:     d.str("customer"),
		Stripe:       d.str("stripe_customer"),
		Currency:     d.str("currency"),
		Amount:       d.i64("amount"),
		Cap:          d.i64("cap"),
		CapSource:    d.str("cap_source"),
		Spent:        d.i64("spent"),
		Reserved:     d.i64("reserved"),
		MaxCharges:   d.i64("max_charges"),
		ExpiresAt:    d.time("expires_at"),
		Generation:   d.i64("generation"),
		Revoked:      d.bool("revoked"),
		RevokeReason: d.str("revoke_reason"),
		SupersededBy: d.str("superseded_by"),
		Supersedes:   d.str("supersedes"),
		SecretHash:   d.str("secret_hash"),
		BudgetShard:  d.str("budget_shard"),
		CreatedAt:    d.time("created_at"),
	}
	for _, e := range d.list("endpoints") {
		s, ok := e.(string)
		if !ok {
			d.fail("endpoints", e)
			continue
		}
		k.Endpoints = append(k.Endpoints, s)
	}
	k.Reservations = make(map[string]reservation)
	for f, v := range d.dict("reservations") {
		m, ok := v.(map[string]any)
		if !ok {
			d.fail("reservations."+f, v)
			continue
		}
		r := fieldReader{data: m}
		k.Reservations[f] = reservation{
			IdempotencyKey: r.str("idempotency_key"),
			Amount:         r.i64("amount"),
			State:          r.str("state"),
			UpdatedAt:      r.time("updated_at"),
		}
		// Reservations written before reserved_at existed have only
		// updated_at, which is never earlier than the first use: their window
		// is read as starting then, the later (permissive) side by at most
		// the time to settlement.
		res := k.Reservations[f]
		res.ReservedAt = res.UpdatedAt
		if at, ok := m["reserved_at"].(time.Time); ok {
			res.ReservedAt = at
		}
		k.Reservations[f] = res
		if r.err != nil {
			d.fail("reservations."+f, r.err)
		}
	}
	if d.err != nil {
		return keyRecord{}, fmt.Errorf("decode %s: %w", doc.Path, d.err)
	}
	return k, nil
}

// shardRecord is a run budget shard: the budget of the keys issued with it, and
// how much of it their reservations and payments use.
type shardRecord struct {
	Budget int64
	Used   int64
}

func decodeShard(doc store.Doc) (shardRecord, error) {
	d := fieldReader{data: doc.Data}
	s := shardRecord{Budget: d.i64("budget"), Used: d.i64("used")}
	if d.err != nil {
		return shardRecord{}, fmt.Errorf("decode %s: %w", doc.Path, d.err)
	}
	return s, nil
}

// fieldReader reads typed fields and remembers the first mismatch.
type fieldReader struct {
	data store.Data
	err  error
}

func (r *fieldReader) fail(field string, v any) {
	if r.err == nil {
		r.err = fmt.Errorf("field %s: unexpected value %v (%T)", field, v, v)
	}
}

func (r *fieldReader) str(f string) string {
	v, ok := r.data[f].(string)
	if !ok {
		r.fail(f, r.data[f])
	}
	return v
}

func (r *fieldReader) i64(f string) int64 {
	v, ok := r.data[f].(int64)
	if !ok {
		r.fail(f, r.data[f])
	}
	return v
}

func (r *fieldReader) bool(f string) bool {
	v, ok := r.data[f].(bool)
	if !ok {
		r.fail(f, r.data[f])
	}
	return v
}

func (r *fieldReader) time(f string) time.Time {
	v, ok := r.data[f].(time.Time)
	if !ok {
		r.fail(f, r.data[f])
	}
	return v
}

func (r *fieldReader) list(f string) []any {
	v, ok := r.data[f].([]any)
	if !ok {
		r.fail(f, r.data[f])
	}
	return v
}

// dict reads a map field; Firestore returns an empty map as an empty map, but a
// backend may return nil for it, which is the same thing.
func (r *fieldReader) dict(f string) map[string]any {
	switch v := r.data[f].(type) {
	case map[string]any:
		return v
	case nil:
		return nil
	default:
		r.fail(f, v)
		return nil
	}
}
