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
func IdempotencyKey(purpose, period, customerID string, amount int64, currency string) string {
	h := sha256.New()
	for _, part := range []string{purpose, period, customerID, strconv.FormatInt(amount, 10), currency} {
		// Length-prefixed, so field boundaries cannot shift between fields.
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return "billrun-" + purpose + "-" + period + "-" + hex.EncodeToString(h.Sum(nil))
}
