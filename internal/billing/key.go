package billing

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// PurposeCharge salts the keys of period charges, so a key made for another
// purpose (a refund, a top-up) with the same business fields never collides.
const PurposeCharge = "charge"

// IdempotencyKey derives the Stripe idempotency key from stable business fields
// only: never from execution ids, attempts or times, so every retry of the same
// decision, by any execution, sends the same key. It is readable at the front
// (period) for people searching Stripe's dashboard and at most 255 characters
// (purpose is a short constant).
//
// generation is the write-ahead record's key generation: 0 for the first key,
// n after the n-th rotation away from a key Stripe poisoned with a stored
// indeterminate answer (see Charge). Generation 0 hashes exactly the fields it
// always did, so keys of records written before rotations existed still match;
// a later generation adds itself to the hash and to the readable prefix. Two
// calls rotating the same record at once derive the same new key, so Stripe
// still sees one request.
func IdempotencyKey(purpose, period, customerID string, amount int64, currency string, generation int64) string {
	parts := []string{purpose, period, customerID, strconv.FormatInt(amount, 10), currency}
	prefix := "billrun-" + purpose + "-" + period + "-"
	if generation > 0 {
		g := strconv.FormatInt(generation, 10)
		parts = append(parts, g)
		prefix += "g" + g + "-"
	}
	h := sha256.New()
	for _, part := range parts {
		// Length-prefixed, so field boundaries cannot shift between fields.
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return prefix + hex.EncodeToString(h.Sum(nil))
}
