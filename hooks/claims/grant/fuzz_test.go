package grant_test

import (
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
	"github.com/formspec/formspec-hooks/hooks/claims/grant"
)

// FuzzParsePublicKey: any string either parses to 32 bytes or fails with
// ErrMalformedPublicKey, without panicking or quoting its input.
func FuzzParsePublicKey(f *testing.F) {
	f.Add(claimstest.PublicHex(claimstest.Owner))
	f.Add("")
	f.Add(strings.Repeat("Z", 64))
	f.Add(strings.Repeat("0", 63))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := grant.ParsePublicKey(s)
		if err == nil && len(k) != 32 {
			t.Fatalf("ParsePublicKey(%q) = %d bytes", s, len(k))
		}
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), s) {
			t.Fatalf("ParsePublicKey error quotes its input: %v", err)
		}
	})
}

// FuzzParseSignature: any string either parses to 64 bytes or fails with
// ErrMalformedSignature, without panicking or quoting its input.
func FuzzParseSignature(f *testing.F) {
	good := claimstest.SignClaim(claimstest.Claim(), claimstest.Owner).Spec.Signature
	f.Add(good)
	f.Add(strings.TrimRight(good, "="))
	f.Add("")
	f.Add(strings.Repeat("-", 88))
	f.Add(good[:87] + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := grant.ParseSignature(s)
		if err == nil && len(sig) != 64 {
			t.Fatalf("ParseSignature(%q) = %d bytes", s, len(sig))
		}
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), s) {
			t.Fatalf("ParseSignature error quotes its input: %v", err)
		}
	})
}

// FuzzParsePrivateKey: never panics, never quotes its input.
func FuzzParsePrivateKey(f *testing.F) {
	f.Add(grant.FormatPrivateKey(claimstest.Owner))
	f.Add("")
	f.Add(strings.Repeat("0", 128))
	f.Fuzz(func(t *testing.T, s string) {
		_, err := grant.ParsePrivateKey(s)
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), strings.TrimSpace(s)) {
			t.Fatalf("ParsePrivateKey error quotes its input")
		}
	})
}
