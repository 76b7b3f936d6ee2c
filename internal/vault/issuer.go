package vault

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"billrun.dev/billrun/internal/store"
)

// Issuer defaults.
const (
	// DefaultKeyTTL is how long a key lives: long enough for a run, including
	// its retries; a key that expires anyway is renewed (Renew, IssuePage).
	DefaultKeyTTL = 48 * time.Hour
	// DefaultHistoryMultiple: without a ceiling, the cap is this many times the
	// customer's largest recent payment.
	DefaultHistoryMultiple = 3
	// DefaultBudgetMarginPercent: the run budget is the sum of the expected
	// amounts times this percentage.
	DefaultBudgetMarginPercent = 110
	// DefaultShardSize: the number of keys that share one budget shard. Each
	// reservation writes its key and its shard, so a shard takes at most this
	// many reservations in a whole run (and as many releases): far below
	// Firestore's write rate per document. Larger shards pool more slack
	// between customers; smaller ones contend less.
	DefaultShardSize = 5
	// DefaultMaxChargesPerKey: a key carries one charge (one idempotency key,
	// replayed as often as needed), so a runaway loop minting new idempotency
	// keys spends nothing more.
	DefaultMaxChargesPerKey = 1
	// MaxReleasedPerKey is how many released reservations (definite failures:
	// no money moved) a key carries besides its MaxChargesPerKey live ones, so
	// a charge can go on under a new idempotency key after Stripe stored an
	// indeterminate answer under the old one and listing showed no payment
	// (billing rotates a charge's key at most this many times).
	MaxReleasedPerKey = 2
	// MaxPageSize: a page is one transaction, and a renewal writes three
	// documents; Firestore allows 500 writes per transaction.
	MaxPageSize = 150
	// MaxAmount bounds amounts and caps (minor units), far above any Stripe
	// limit, so that no budget arithmetic can overflow.
	MaxAmount = int64(1_000_000_000_000)
)

// Hold reasons, machine-readable, for the caller to record with held_for_review.
const (
	// HoldAmountAboveCap: the amount to charge exceeds the customer's cap (F2).
	HoldAmountAboveCap = "amount_above_cap"
	// HoldNoCapSource: no ceiling, no payment history and no default cap for the
	// currency, so there is nothing independent of the amount to cap it with.
	HoldNoCapSource = "no_cap_source"
	// HoldKeyRevoked: an operator revoked this customer's key for the period.
	HoldKeyRevoked = "key_revoked"
)

// Cap sources.
const (
	CapFromCeiling = "ceiling"
	CapFromHistory = "history"
	CapFromDefault = "default"
)

// IssuerConfig configures an Issuer. Zero values take the defaults above.
type IssuerConfig struct {
	// Store holds the key documents; required.
	Store store.Backend
	// SigningSecret turns references into credentials; required, at least 32
	// bytes. The proxy must be given the same.
	SigningSecret []byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// KeyTTL is a key's lifetime; 0 means DefaultKeyTTL.
	KeyTTL time.Duration
	// HistoryMultiple multiplies the largest recent payment into a cap; 0 means
	// DefaultHistoryMultiple.
	HistoryMultiple int64
	// DefaultCaps is the cap by currency (minor units) for customers with
	// neither ceiling nor history; a currency without an entry holds them.
	DefaultCaps map[string]int64
	// BudgetMarginPercent: run budget = sum of expected amounts × this / 100;
	// 0 means DefaultBudgetMarginPercent; below 100 is invalid.
	BudgetMarginPercent int64
	// ShardSize is how many keys share a budget shard; 0 means DefaultShardSize.
	ShardSize int
	// MaxChargesPerKey is how many distinct idempotency keys one key may carry;
	// 0 means DefaultMaxChargesPerKey.
	MaxChargesPerKey int64
}

// Issuer issues, renews, revokes and reconciles vault keys.
type Issuer struct {
	cfg IssuerConfig
}

// NewIssuer checks cfg, fills in defaults, and returns an Issuer.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	var problems []string
	if cfg.Store == nil {
		problems = append(problems, "Store is required")
	}
	if len(cfg.SigningSecret) < 32 {
		problems = append(problems, "SigningSecret must be at least 32 bytes")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeyTTL == 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	if cfg.HistoryMultiple == 0 {
		cfg.HistoryMultiple = DefaultHistoryMultiple
	}
	if cfg.BudgetMarginPercent == 0 {
		cfg.BudgetMarginPercent = DefaultBudgetMarginPercent
	}
	if cfg.ShardSize == 0 {
		cfg.ShardSize = DefaultShardSize
	}
	if cfg.MaxChargesPerKey == 0 {
		cfg.MaxChargesPerKey = DefaultMaxChargesPerKey
	}
	if cfg.KeyTTL < 0 {
		problems = append(problems, "KeyTTL must be positive")
	}
	if cfg.HistoryMultiple < 1 || cfg.HistoryMultiple > 100 {
		problems = append(problems, "HistoryMultiple must be between 1 and 100")
	}
	if cfg.BudgetMarginPercent < 100 || cfg.BudgetMarginPercent > 1000 {
		problems = append(problems, "BudgetMarginPercent must be between 100 and 1000")
	}
	if cfg.ShardSize < 1 || cfg.ShardSize > MaxPageSize {
		problems = append(problems, fmt.Sprintf("ShardSize must be between 1 and %d", MaxPageSize))
	}
	if cfg.MaxChargesPerKey < 1 || cfg.MaxChargesPerKey > 100 {
		problems = append(problems, "MaxChargesPerKey must be between 1 and 100")
	}
	for cur, c := range cfg.DefaultCaps {
		if !currencyRE.MatchString(cur) || c <= 0 || c > MaxAmount {
			problems = append(problems, fmt.Sprintf("DefaultCaps[%q] = %d is invalid", cur, c))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("vault issuer config: %s: %w", strings.Join(problems, "; "), ErrInvalid)
	}
	cfg.SigningSecret = slices.Clone(cfg.SigningSecret)
	return &Issuer{cfg: cfg}, nil
}

// IssueRequest is one due customer of a page.
type IssueRequest struct {
	// Customer is billrun's customer id: issuance is idempotent per (period,
	// Customer).
	Customer string
	// StripeCustomer is the Stripe customer id that every request on the key
	// must name; "" means Customer is the Stripe id.
	StripeCustomer string
	// Currency is the ISO code in lower case, as Stripe writes it.
	Currency string
	// Amount is what the run means to charge, in minor units.
	Amount int64
	// Ceiling is the customer's cap (plan maximum or operator value) in minor
	// units; 0 means none.
	Ceiling int64
	// RecentPayments are the customer's recent successful payments in Currency,
	// minor units (for example the last three periods); used when there is no
	// ceiling.
	RecentPayments []int64
}

// Issued is the vault's answer for one customer. It holds no secret.
type Issued struct {
	Period   string
	Customer string
	// KeyRef is the key reference, "" when Held.
	KeyRef     string
	Amount     int64
	Currency   string
	Cap        int64
	CapSource  string
	Generation int64
	ExpiresAt  time.Time
	// Held: no key; the caller records held_for_review with Reason (one of the
	// Hold… codes) and Detail.
	Held   bool
	Reason string
	Detail string
}

var (
	periodRE   = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)
	currencyRE = regexp.MustCompile(`^[a-z]{3}$`)
)

func checkCustomer(id string) error {
	if id == "" || len(id) > 255 || strings.Contains(id, "/") || id == "." || id == ".." || strings.HasPrefix(id, "__") {
		return fmt.Errorf("customer id %q: %w", id, ErrInvalid)
	}
	return nil
}

func checkRequest(r IssueRequest) error {
	if err := checkCustomer(r.Customer); err != nil {
		return err
	}
	if len(r.StripeCustomer) > 255 {
		return fmt.Errorf("customer %s: Stripe customer id too long: %w", r.Customer, ErrInvalid)
	}
	if !currencyRE.MatchString(r.Currency) {
		return fmt.Errorf("customer %s: currency %q is not a lower-case ISO code: %w", r.Customer, r.Currency, ErrInvalid)
	}
	if r.Amount <= 0 || r.Amount > MaxAmount {
		return fmt.Errorf("customer %s: amount %d out of range: %w", r.Customer, r.Amount, ErrInvalid)
	}
	if r.Ceiling < 0 || r.Ceiling > MaxAmount {
		return fmt.Errorf("customer %s: ceiling %d out of range: %w", r.Customer, r.Ceiling, ErrInvalid)
	}
	for _, p := range r.RecentPayments {
		if p <= 0 || p > MaxAmount {
			return fmt.Errorf("customer %s: recent payment %d out of range: %w", r.Customer, p, ErrInvalid)
		}
	}
	return nil
}

// capFor derives a customer's cap from sources that do not depend on the amount
// being charged, so an inflated amount is stopped rather than copied into its cap.
func (is *Issuer) capFor(r IssueRequest) (limit int64, source, detail string) {
	switch {
	case r.Ceiling > 0:
		return r.Ceiling, CapFromCeiling, fmt.Sprintf("customer ceiling %d", r.Ceiling)
	case len(r.RecentPayments) > 0:
		largest := slices.Max(r.RecentPayments)
		return is.cfg.HistoryMultiple * largest, CapFromHistory,
			fmt.Sprintf("%d × largest recent payment %d", is.cfg.HistoryMultiple, largest)
	}
	if c, ok := is.cfg.DefaultCaps[r.Currency]; ok {
		return c, CapFromDefault, fmt.Sprintf("default cap for %s", r.Currency)
	}
	return 0, "", ""
}

func issuedFrom(k keyRecord) Issued {
	return Issued{
		Period:     k.Period,
		Customer:   k.Customer,
		KeyRef:     k.Ref,
		Amount:     k.Amount,
		Currency:   k.Currency,
		Cap:        k.Cap,
		CapSource:  k.CapSource,
		Generation: k.Generation,
		ExpiresAt:  k.ExpiresAt,
	}
}

// IssuePage issues the keys of one page of a period's due customers, in one
// transaction of its own (IssueTx in a caller's transaction).
func (is *Issuer) IssuePage(ctx context.Context, period string, reqs []IssueRequest) ([]Issued, error) {
	var out []Issued
	err := is.cfg.Store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = is.IssueTx(ctx, tx, period, reqs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("issue page %s: %w", period, err)
	}
	return out, nil
}

// IssueTx issues the keys of one page inside tx, so a caller can write its own
// records of the same customers in the same transaction. It reads first and
// then writes, as Firestore transactions require: a caller must do all its
// reads before calling it. It is idempotent per (period, customer): a retried
// page returns the same references; a customer whose key has expired gets its
// next generation (see Renew). A customer whose amount exceeds its cap, or who
// has no cap source, is Held and gets no key; the page goes on. New keys share
// budget shards of at most ShardSize keys, each holding the sum of its keys'
// amounts times the margin, so the run budget grows page by page with no
// document that every charge writes. It writes at most 3 documents per
// customer plus one per shard.
func (is *Issuer) IssueTx(ctx context.Context, tx store.Tx, period string, reqs []IssueRequest) ([]Issued, error) {
	if !periodRE.MatchString(period) {
		return nil, fmt.Errorf("issue page: period %q is not YYYY-MM: %w", period, ErrInvalid)
	}
	if len(reqs) > MaxPageSize {
		return nil, fmt.Errorf("issue page: %d customers, at most %d: %w", len(reqs), MaxPageSize, ErrInvalid)
	}
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if err := checkRequest(r); err != nil {
			return nil, fmt.Errorf("issue page: %w", err)
		}
		if seen[r.Customer] {
			return nil, fmt.Errorf("issue page: customer %s twice: %w", r.Customer, ErrInvalid)
		}
		seen[r.Customer] = true
	}

	now := is.cfg.Now().UTC()
	out := make([]Issued, len(reqs))
	existing := make([]*keyRecord, len(reqs))
	for i, r := range reqs {
		ref, err := readIndex(ctx, tx, period, r.Customer)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		k, err := readKey(ctx, tx, ref)
		if err != nil {
			return nil, err
		}
		existing[i] = &k
	}

	var fresh []*keyRecord
	for i, r := range reqs {
		k := existing[i]
		switch {
		case k == nil:
			limit, source, why := is.capFor(r)
			switch {
			case source == "":
				out[i] = held(period, r, 0, HoldNoCapSource, fmt.Sprintf("no ceiling, no recent payments and no default cap for %s", r.Currency))
			case r.Amount > limit:
				out[i] = held(period, r, limit, HoldAmountAboveCap, fmt.Sprintf("amount %d %s is above cap %d (%s)", r.Amount, r.Currency, limit, why))
			default:
				nk := is.newKey(period, r, limit, source, now)
				fresh = append(fresh, &nk)
				out[i] = issuedFrom(nk)
			}
		case k.Revoked:
			out[i] = held(period, r, k.Cap, HoldKeyRevoked, fmt.Sprintf("key %s revoked: %s", k.Ref, k.RevokeReason))
		case !now.Before(k.ExpiresAt):
			nk, err := is.renew(tx, *k, now)
			if err != nil {
				return nil, err
			}
			out[i] = issuedFrom(nk)
		default:
			out[i] = issuedFrom(*k)
		}
	}

	// Keys are dealt round-robin over the page's shards: the workflow
	// charges consecutive customers in parallel, and dealing them apart
	// puts those concurrent reservations on different shard documents.
	shards := make([][]*keyRecord, (len(fresh)+is.cfg.ShardSize-1)/is.cfg.ShardSize)
	for j, k := range fresh {
		shards[j%len(shards)] = append(shards[j%len(shards)], k)
	}
	for _, group := range shards {
		var sum int64
		for _, k := range group {
			sum += k.Amount
		}
		shard := shardCollection(period) + "/" + newShardID()
		if err := tx.Create(shard, store.Data{
			"budget":     ceilDiv(sum*is.cfg.BudgetMarginPercent, 100),
			"used":       int64(0),
			"expected":   sum,
			"keys":       int64(len(group)),
			"created_at": now,
		}); err != nil {
			return nil, err
		}
		for _, k := range group {
			k.BudgetShard = shard
			if err := tx.Create(keyPath(k.Ref), k.data()); err != nil {
				return nil, err
			}
			if err := writeIndex(tx, *k); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func held(period string, r IssueRequest, limit int64, reason, detail string) Issued {
	return Issued{Period: period, Customer: r.Customer, Amount: r.Amount, Currency: r.Currency, Cap: limit, Held: true, Reason: reason, Detail: detail}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func newShardID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return "bs_" + hex.EncodeToString(b[:])
}

func (is *Issuer) newKey(period string, r IssueRequest, limit int64, source string, now time.Time) keyRecord {
	ref := newRef()
	return keyRecord{
		Ref:          ref,
		Period:       period,
		Customer:     r.Customer,
		Stripe:       cmp.Or(r.StripeCustomer, r.Customer),
		Currency:     r.Currency,
		Amount:       r.Amount,
		Cap:          limit,
		CapSource:    source,
		MaxCharges:   is.cfg.MaxChargesPerKey,
		Reservations: map[string]reservation{},
		Endpoints:    []string{EndpointCreatePaymentIntent, EndpointGetPaymentIntent, EndpointListPaymentIntents},
		ExpiresAt:    now.Add(is.cfg.KeyTTL),
		Generation:   1,
		SecretHash:   secretHash(Credential(is.cfg.SigningSecret, ref)),
		CreatedAt:    now,
	}
}

// renew writes k's next generation: a new reference and credential, a new expiry,
// and everything that bounds spending carried over unchanged (cap, spent,
// reserved, reservations, charge count, budget shard), so renewal never
// uncaps anything (F16). The old generation is revoked and points to the new.
func (is *Issuer) renew(tx store.Tx, k keyRecord, now time.Time) (keyRecord, error) {
	nk := k
	nk.Ref = newRef()
	nk.Generation = k.Generation + 1
	nk.ExpiresAt = now.Add(is.cfg.KeyTTL)
	nk.Supersedes = k.Ref
	nk.SecretHash = secretHash(Credential(is.cfg.SigningSecret, nk.Ref))
	nk.CreatedAt = now
	if err := tx.Create(keyPath(nk.Ref), nk.data()); err != nil {
		return keyRecord{}, err
	}
	if err := tx.Update(keyPath(k.Ref), store.Data{
		"revoked":       true,
		"revoke_reason": fmt.Sprintf("expired at %s; renewed as %s", k.ExpiresAt.Format(time.RFC3339), nk.Ref),
		"superseded_by": nk.Ref,
	}); err != nil {
		return keyRecord{}, err
	}
	return nk, writeIndex(tx, nk)
}

// The index maps (period, customer) to the customer's current key, which is what
// makes issuance idempotent without a query.
func readIndex(ctx context.Context, r store.Reader, period, customer string) (string, error) {
	doc, err := r.Get(ctx, indexPath(period, customer))
	if err != nil {
		return "", err
	}
	ref, ok := doc.Data["key_ref"].(string)
	if !ok {
		return "", fmt.Errorf("index %s has no key_ref", doc.Path)
	}
	return ref, nil
}

func writeIndex(tx store.Tx, k keyRecord) error {
	return tx.Set(indexPath(k.Period, k.Customer), store.Data{
		"key_ref":    k.Ref,
		"generation": k.Generation,
	})
}

// current follows a key's renewals to its current generation.
func current(ctx context.Context, r store.Reader, ref string) (keyRecord, error) {
	k, err := readKey(ctx, r, ref)
	for i := 0; err == nil && k.SupersededBy != ""; i++ {
		if i == maxChain {
			return keyRecord{}, fmt.Errorf("key %s: more than %d generations: %w", ref, maxChain, ErrInvalid)
		}
		k, err = readKey(ctx, r, k.SupersededBy)
	}
	return k, err
}

// Renew returns the current generation of ref's key, issuing the next one if it
// has expired. Charge calls it when the proxy answers vault_key_expired, or
// vault_unknown_key for a reference the workflow still holds after a renewal.
// It returns ErrKeyRevoked for a key an operator revoked.
func (is *Issuer) Renew(ctx context.Context, ref string) (Issued, error) {
	if !validRef(ref) {
		return Issued{}, fmt.Errorf("renew %q: %w", ref, ErrUnknownKey)
	}
	now := is.cfg.Now().UTC()
	var out Issued
	err := is.cfg.Store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		k, err := current(ctx, tx, ref)
		switch {
		case err != nil:
			return err
		case k.Revoked:
			return fmt.Errorf("key %s: %s: %w", k.Ref, k.RevokeReason, ErrKeyRevoked)
		case now.Before(k.ExpiresAt):
			out = issuedFrom(k)
			return nil
		}
		nk, err := is.renew(tx, k, now)
		out = issuedFrom(nk)
		return err
	})
	if err != nil {
		return Issued{}, fmt.Errorf("renew %s: %w", ref, err)
	}
	return out, nil
}

// Revoke revokes ref's current generation for good (an operator's kill switch):
// its credential stops working at once and the customer is held for the period.
func (is *Issuer) Revoke(ctx context.Context, ref, reason string) error {
	if !validRef(ref) {
		return fmt.Errorf("revoke %q: %w", ref, ErrUnknownKey)
	}
	err := is.cfg.Store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		k, err := current(ctx, tx, ref)
		if err != nil || k.Revoked {
			return err
		}
		return tx.Update(keyPath(k.Ref), store.Data{"revoked": true, "revoke_reason": "revoked by operator: " + reason})
	})
	if err != nil {
		return fmt.Errorf("revoke %s: %w", ref, err)
	}
	return nil
}

// Reconcile settles the reservation of idempotencyKey on ref's key from what
// Charge learnt from Stripe by other means (for example listing the customer's
// PaymentIntents after the 24-hour idempotency window, F11). It returns the
// reservation's state: "committed" or "released". A committed reservation is
// never released.
func (is *Issuer) Reconcile(ctx context.Context, ref, idempotencyKey string, o Outcome) (string, error) {
	if o != Succeeded && o != Failed {
		return "", fmt.Errorf("reconcile %s: outcome %v: %w", ref, o, ErrInvalid)
	}
	now := is.cfg.Now().UTC()
	var state string
	err := is.cfg.Store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		state, err = settle(ctx, tx, ref, idempotencyKey, o, now)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reconcile %s: %w", ref, err)
	}
	return state, nil
}

// KeyState is a read-only view of a key, for run summaries and tests.
type KeyState struct {
	Issued
	Spent    int64
	Reserved int64
	// Pending counts reservations whose outcome is not known yet.
	Pending      int
	Charges      int
	Revoked      bool
	RevokeReason string
	SupersededBy string
}

// Key returns the state of ref's key (the generation named, not its successor).
func (is *Issuer) Key(ctx context.Context, ref string) (KeyState, error) {
	if !validRef(ref) {
		return KeyState{}, fmt.Errorf("key %q: %w", ref, ErrUnknownKey)
	}
	k, err := readKey(ctx, is.cfg.Store, ref)
	if err != nil {
		return KeyState{}, err
	}
	ks := KeyState{
		Issued: issuedFrom(k), Spent: k.Spent, Reserved: k.Reserved, Charges: len(k.Reservations),
		Revoked: k.Revoked, RevokeReason: k.RevokeReason, SupersededBy: k.SupersededBy,
	}
	for _, r := range k.Reservations {
		if r.State == statePending {
			ks.Pending++
		}
	}
	return ks, nil
}

// Budget is a run's budget, summed over its shards.
type Budget struct {
	Total    int64 // sum of the shards' budgets
	Used     int64 // reserved or spent by all keys of the run
	Expected int64 // sum of the expected amounts of the keys issued
	Shards   int64
}

// RunBudget sums a period's budget shards with one aggregation query.
func (is *Issuer) RunBudget(ctx context.Context, period string) (Budget, error) {
	if !periodRE.MatchString(period) {
		return Budget{}, fmt.Errorf("run budget: period %q is not YYYY-MM: %w", period, ErrInvalid)
	}
	agg, err := is.cfg.Store.Aggregate(ctx, store.Query{Collection: shardCollection(period)}, "budget", "used", "expected")
	if err != nil {
		return Budget{}, fmt.Errorf("run budget %s: %w", period, err)
	}
	return Budget{Total: agg.Sums["budget"], Used: agg.Sums["used"], Expected: agg.Sums["expected"], Shards: agg.Count}, nil
}
