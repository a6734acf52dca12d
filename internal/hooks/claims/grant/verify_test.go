package grant_test

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"filippo.io/edwards25519"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// messages are signed messages to forge, in both versions.
func messages(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range 16 {
		for _, version := range []string{v1alpha1.SignatureV1, v1alpha1.SignatureV2} {
			g := sample()
			g.Workspace, g.Permission = "ws"+strings.Repeat("x", i), v1alpha1.PermissionAdmin
			msg, err := g.Message(version)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, msg)
		}
	}
	return out
}

// TestWeakKeysForge shows that every key in the weak corpus is a real
// threat and is refused: for each small-order encoding, "signatures"
// R = small-order point, S = 0, made with no private key, verify some of
// the messages under plain ed25519.Verify (R must equal -[k]A, and k
// depends on R: for the identity R = identity always works, for a point
// of order 8 about one pair in eight); grant.Verify refuses every one of
// them, and CheckPublicKey refuses the key.
func TestWeakKeysForge(t *testing.T) {
	keys := append(append([]claimstest.WeakKey{}, claimstest.SmallOrderKeys...), claimstest.NonCanonicalSmallOrderKeys...)
	for _, k := range keys {
		t.Run(k.Name, func(t *testing.T) {
			pub, err := hex.DecodeString(k.Hex)
			if err != nil {
				t.Fatal(err)
			}
			forged := 0
			for i, msg := range messages(t) {
				for _, r := range claimstest.SmallOrderKeys {
					sig := mustHex(t, r.Hex+strings.Repeat("00", 32))
					if ed25519.Verify(pub, msg, sig) {
						forged++
					}
					if grant.Verify(pub, msg, sig) {
						t.Errorf("message %d: grant.Verify accepts the forgery R=%s, S=0", i, r.Name)
					}
				}
			}
			if forged == 0 {
				t.Errorf("no forgery verifies under plain ed25519.Verify: the corpus entry is not what it claims")
			}
			if err := grant.CheckPublicKey(pub); !errors.Is(err, grant.ErrWeakPublicKey) {
				t.Errorf("CheckPublicKey(): got %v, want %v", err, grant.ErrWeakPublicKey)
			}
		})
	}
}

// TestIdentityKeyForgery is the attack as reported: with ownerPublicKey =
// 01 then 62 zeros, R = identity and S = 0 verify any message under plain
// ed25519.Verify, and under grant.Verify none.
func TestIdentityKeyForgery(t *testing.T) {
	pub := mustHex(t, "01"+strings.Repeat("00", 31))
	sig := mustHex(t, "01"+strings.Repeat("00", 63))
	for i, msg := range messages(t) {
		if !ed25519.Verify(pub, msg, sig) {
			t.Fatalf("message %d: plain ed25519.Verify refuses the forgery; the test would prove nothing", i)
		}
		if grant.Verify(pub, msg, sig) {
			t.Errorf("message %d: grant.Verify accepts a signature made with no private key", i)
		}
	}
}

func TestCheckPublicKey(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      []byte
		wantErr error
	}{
		"Owner":        {reason: "A generated key is sound.", in: claimstest.Owner.Public().(ed25519.PublicKey)},
		"Short":        {reason: "31 bytes is no key.", in: make([]byte, 31), wantErr: grant.ErrMalformedPublicKey},
		"NotAPoint":    {reason: "y = 2 is on no point of the curve.", in: mustHex(t, claimstest.NotAPointKey), wantErr: grant.ErrMalformedPublicKey},
		"MixedOrder":   {reason: "A prime-order point plus one of order 2 is not refused: only the owner of the first can sign with it.", in: mixedOrderKey(t)},
		"NonCanonical": {reason: "A prime-order point with y written as p+3 is refused: one key, one spelling.", in: mustHex(t, claimstest.NonCanonicalKey.Hex), wantErr: grant.ErrWeakPublicKey},
	}
	// Twice: the second pass gets the outcomes CheckPublicKey remembered
	// of the first, in another order.
	for _, pass := range []string{"computed", "remembered"} {
		for name, tc := range cases {
			t.Run(pass+"/"+name, func(t *testing.T) {
				err := grant.CheckPublicKey(tc.in)
				if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\nCheckPublicKey(): -want, +got:\n%s", tc.reason, diff)
				}
			})
		}
	}
}

// TestVerifyStrict pins the verification rule on signatures a sound or
// mixed-order key can meet: honest signatures verify; an S of L or more
// and a small-order R are refused.
func TestVerifyStrict(t *testing.T) {
	msg, err := sample().Message(v1alpha1.SignatureV2)
	if err != nil {
		t.Fatal(err)
	}
	owner := claimstest.Owner.Public().(ed25519.PublicKey)
	honest := ed25519.Sign(claimstest.Owner, msg)
	mixed, smallR := smallOrderRSignature(t)
	cases := map[string]struct {
		reason    string
		pub       ed25519.PublicKey
		msg, sig  []byte
		want      bool
		wantPlain bool
	}{
		"Honest": {reason: "A signature by the owner's key verifies.", pub: owner, msg: msg, sig: honest, want: true, wantPlain: true},
		"OtherMessage": {
			reason: "Not for another message.", pub: owner, msg: append([]byte{}, append(msg, 0)...), sig: honest,
		},
		"SPlusL": {
			reason: "S + L is the same scalar; Go's verifier already refuses any S not below L, so a signature has one form.",
			pub:    owner, msg: msg, sig: plusL(t, honest),
		},
		"SmallOrderR": {
			reason: "A mixed-order key accepts a signature whose R is the identity under plain ed25519.Verify; grant.Verify refuses small-order R.",
			pub:    mixed, msg: smallR.msg, sig: smallR.sig, wantPlain: true,
		},
		"NonCanonicalR": {
			reason: "R = identity with the sign bit set is refused by both: Go compares R with the canonical encoding.",
			pub:    mustHex(t, "01"+strings.Repeat("00", 31)), msg: msg, sig: mustHex(t, "01"+strings.Repeat("00", 30)+"80"+strings.Repeat("00", 32)),
		},
		"ShortSignature": {reason: "63 bytes is no signature.", pub: owner, msg: msg, sig: honest[:63]},
	}
	// Twice, as in TestCheckPublicKey: a remembered "Honest" must not
	// answer for "OtherMessage", which shares its key and signature.
	for _, pass := range []string{"computed", "remembered"} {
		for name, tc := range cases {
			t.Run(pass+"/"+name, func(t *testing.T) {
				if got := ed25519.Verify(tc.pub, tc.msg, tc.sig); got != tc.wantPlain {
					t.Errorf("%s\ned25519.Verify() = %v, want %v: the case does not test what it says", tc.reason, got, tc.wantPlain)
				}
				if got := grant.Verify(tc.pub, tc.msg, tc.sig); got != tc.want {
					t.Errorf("%s\ngrant.Verify() = %v, want %v", tc.reason, got, tc.want)
				}
			})
		}
	}
}

// TestGenerateKeyNeverWeak: keygen's keys always pass CheckPublicKey.
func TestGenerateKeyNeverWeak(t *testing.T) {
	for i := range 200 {
		pub, _, err := grant.GenerateKey(nil)
		if err != nil {
			t.Fatalf("GenerateKey() #%d: %v", i, err)
		}
		if _, err := grant.ParsePublicKey(grant.FormatPublicKey(pub)); err != nil {
			t.Fatalf("ParsePublicKey(GenerateKey() #%d): %v", i, err)
		}
	}
}

// ownerScalar is the secret scalar of claimstest.Owner.
func ownerScalar(t *testing.T) *edwards25519.Scalar {
	t.Helper()
	h := sha512.Sum512(claimstest.Owner.Seed())
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// mixedOrderKey is Owner's public point plus the point of order 2.
func mixedOrderKey(t *testing.T) ed25519.PublicKey {
	t.Helper()
	a, err := new(edwards25519.Point).SetBytes(claimstest.Owner.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	t2, err := new(edwards25519.Point).SetBytes(mustHex(t, claimstest.Order2Key))
	if err != nil {
		t.Fatal(err)
	}
	return new(edwards25519.Point).Add(a, t2).Bytes()
}

type signed struct{ msg, sig []byte }

// smallOrderRSignature makes, with Owner's scalar a, a signature R =
// identity, S = k·a under the mixed-order key A = [a]B + T2: it satisfies
// [S]B = R + [k]A whenever k is even, since [k]T2 is then the identity.
// It tries grants until k is even.
func smallOrderRSignature(t *testing.T) (ed25519.PublicKey, signed) {
	t.Helper()
	pub := mixedOrderKey(t)
	a := ownerScalar(t)
	r := mustHex(t, "01"+strings.Repeat("00", 31))
	for i := range 64 {
		g := sample()
		g.GrantedBy = strings.Repeat("m", i+1)
		msg, err := g.Message(v1alpha1.SignatureV2)
		if err != nil {
			t.Fatal(err)
		}
		h := sha512.New()
		h.Write(r)
		h.Write(pub)
		h.Write(msg)
		k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
		if err != nil {
			t.Fatal(err)
		}
		if k.Bytes()[0]&1 != 0 {
			continue
		}
		s := edwards25519.NewScalar().Multiply(k, a)
		return pub, signed{msg: msg, sig: append(append([]byte{}, r...), s.Bytes()...)}
	}
	t.Fatal("no grant with an even k in 64 tries")
	return nil, signed{}
}

// plusL returns sig with L, the group order, added to S.
func plusL(t *testing.T, sig []byte) []byte {
	t.Helper()
	l := mustHex(t, "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	out := append([]byte{}, sig...)
	carry := 0
	for i := range 32 {
		v := int(out[32+i]) + int(l[i]) + carry
		out[32+i], carry = byte(v), v>>8
	}
	return out
}
