package vault

import (
	"strings"
	"testing"
)

func TestParseCredential(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	ref := "vk_0123456789abcdef0123456789abcdef"
	good := Credential(secret, ref)
	tests := []struct {
		name, credential string
		ok               bool
	}{
		{"good", good, true},
		{"empty", "", false},
		{"reference only", ref, false},
		{"truncated MAC", good[:len(good)-1], false},
		{"extended MAC", good + "0", false},
		{"flipped MAC digit", good[:len(good)-1] + flip(good[len(good)-1]), false},
		{"upper-case MAC", ref + "." + strings.ToUpper(good[len(ref)+1:]), false},
		{"other secret", Credential([]byte(strings.Repeat("j", 32)), ref), false},
		{"other reference", strings.Replace(good, "vk_0", "vk_1", 1), false},
		{"upper-case reference", strings.Replace(good, "abcdef.", "ABCDEF.", 1), false},
		{"two dots", good + ".x", false},
		{"stripe key", "sk_test_123", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseCredential(secret, tc.credential)
			if ok != tc.ok || (ok && got != ref) {
				t.Errorf("parseCredential(%q) = %q, %v; want ok=%v", tc.credential, got, ok, tc.ok)
			}
		})
	}
}

func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

// FuzzParseCredential: nothing but the exact credential of a reference opens it.
func FuzzParseCredential(f *testing.F) {
	secret := []byte(strings.Repeat("k", 32))
	f.Add(Credential(secret, "vk_0123456789abcdef0123456789abcdef"))
	f.Add("vk_.")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		ref, ok := parseCredential(secret, s)
		if ok && s != Credential(secret, ref) {
			t.Fatalf("%q accepted as %s", s, ref)
		}
	})
}
