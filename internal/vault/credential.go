package vault

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// A key reference is "vk_" and 32 hex digits (128 random bits). The usable
// credential is the reference, a dot, and HMAC-SHA256(signing secret, reference)
// in hex: only a holder of the signing secret (the functions) can turn a
// reference into a credential, so the workflow, which sees references only, can
// spend nothing.
const (
	refPrefix   = "vk_"
	refHexLen   = 32
	macHexLen   = 2 * sha256.Size
	credContext = "billrun vault credential v1\x00"
)

func newRef() string {
	var b [refHexLen / 2]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it crashes the
	// program instead if the system's randomness fails.
	_, _ = rand.Read(b[:])
	return refPrefix + hex.EncodeToString(b[:])
}

// ValidRef reports whether ref has the shape of a key reference, so a caller
// can refuse a malformed one before any store read.
func ValidRef(ref string) bool { return validRef(ref) }

func validRef(ref string) bool {
	if len(ref) != len(refPrefix)+refHexLen || !strings.HasPrefix(ref, refPrefix) {
		return false
	}
	for _, c := range ref[len(refPrefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func mac(signingSecret []byte, ref string) []byte {
	m := hmac.New(sha256.New, signingSecret)
	m.Write([]byte(credContext))
	m.Write([]byte(ref))
	return m.Sum(nil)
}

// Credential derives the usable credential of a key reference: Charge presents it
// to the proxy as its Stripe API key. It must never be logged, returned to the
// workflow or stored.
func Credential(signingSecret []byte, ref string) string {
	return ref + "." + hex.EncodeToString(mac(signingSecret, ref))
}

// secretHash is what a key document stores of its credential.
func secretHash(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(sum[:])
}

// parseCredential returns the key reference of a well-formed credential whose
// MAC matches, without touching the store, so forged or truncated credentials
// cost nothing but a hash.
func parseCredential(signingSecret []byte, credential string) (string, bool) {
	ref, macHex, ok := strings.Cut(credential, ".")
	if !ok || !validRef(ref) || len(macHex) != macHexLen {
		return "", false
	}
	// Compared in its canonical hex form, so exactly one string opens a key.
	want := hex.EncodeToString(mac(signingSecret, ref))
	return ref, hmac.Equal([]byte(macHex), []byte(want))
}

// hashMatches compares a credential with a stored hash in constant time.
func hashMatches(credential, stored string) bool {
	return subtle.ConstantTimeCompare([]byte(secretHash(credential)), []byte(stored)) == 1
}
