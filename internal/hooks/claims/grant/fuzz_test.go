package grant_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// FuzzParsePublicKey: any string either parses to 32 bytes that
// CheckPublicKey accepts, or fails with ErrMalformedPublicKey or
// ErrWeakPublicKey, without panicking or quoting its input. The seeds hold
// every weak encoding of the corpus.
func FuzzParsePublicKey(f *testing.F) {
	f.Add(claimstest.PublicHex(claimstest.Owner))
	f.Add("")
	f.Add(strings.Repeat("Z", 64))
	f.Add(strings.Repeat("0", 63))
	f.Add(claimstest.NotAPointKey)
	for _, k := range claimstest.WeakKeys() {
		f.Add(k.Hex)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := grant.ParsePublicKey(s)
		if err == nil && (len(k) != 32 || grant.CheckPublicKey(k) != nil) {
			t.Fatalf("ParsePublicKey(%q) accepted a key CheckPublicKey refuses", s)
		}
		if err != nil && !errors.Is(err, grant.ErrMalformedPublicKey) && !errors.Is(err, grant.ErrWeakPublicKey) {
			t.Fatalf("ParsePublicKey(%q): unexpected error %v", s, err)
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

// FuzzReadPrivateKey: any file either reads as a key or fails with
// ErrMalformedPrivateKey or ErrPublicKey, without panicking or quoting it.
func FuzzReadPrivateKey(f *testing.F) {
	owner, err := grant.MarshalPrivateKey(claimstest.Owner)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(owner)
	f.Add([]byte(grant.FormatPrivateKey(claimstest.Owner) + "\n"))
	f.Add([]byte(claimstest.PublicHex(claimstest.Owner)))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		priv, _, err := grant.ReadPrivateKey(b)
		switch {
		case err == nil && len(priv) != ed25519.PrivateKeySize:
			t.Fatalf("ReadPrivateKey returned %d bytes", len(priv))
		case err != nil && !errors.Is(err, grant.ErrMalformedPrivateKey) && !errors.Is(err, grant.ErrPublicKey):
			t.Fatalf("ReadPrivateKey error wraps neither sentinel: %v", err)
		case err != nil && len(strings.TrimSpace(string(b))) > 8 && strings.Contains(err.Error(), strings.TrimSpace(string(b))):
			t.Fatalf("ReadPrivateKey error quotes its input")
		}
	})
}

// FuzzVerify checks grant.Verify against plain ed25519.Verify on any key,
// message and signature: it accepts only what plain verification accepts,
// and only for a key CheckPublicKey accepts. The seeds are an honest
// signature and, for every weak key, the forgeries R = small-order point,
// S = 0, which plain verification accepts for some messages.
func FuzzVerify(f *testing.F) {
	msg := []byte("formspec.dev/grant/v2 fuzz seed")
	f.Add([]byte(claimstest.Owner.Public().(ed25519.PublicKey)), msg, ed25519.Sign(claimstest.Owner, msg))
	for _, k := range claimstest.WeakKeys() {
		pub, _ := hex.DecodeString(k.Hex)
		for _, r := range claimstest.SmallOrderKeys {
			sig, _ := hex.DecodeString(r.Hex + strings.Repeat("00", 32))
			f.Add(pub, msg, sig)
		}
	}
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if len(pub) != ed25519.PublicKeySize {
			// ed25519.Verify panics on a key of the wrong length; grant.Verify
			// must not.
			if grant.Verify(pub, msg, sig) {
				t.Fatalf("grant.Verify accepted a %d-byte key", len(pub))
			}
			return
		}
		if !grant.Verify(pub, msg, sig) {
			return
		}
		if !ed25519.Verify(pub, msg, sig) {
			t.Fatalf("grant.Verify accepted what ed25519.Verify refuses")
		}
		if err := grant.CheckPublicKey(pub); err != nil {
			t.Fatalf("grant.Verify accepted a signature under a refused key: %v", err)
		}
	})
}
