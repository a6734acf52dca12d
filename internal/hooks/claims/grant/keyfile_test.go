package grant_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// rfc8410Key and rfc8410Public are the example ed25519 key pair of RFC
// 8410, section 10: the PEM an external tool writes, byte for byte.
const (
	rfc8410Key = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC
-----END PRIVATE KEY-----
`
	rfc8410PublicPEM = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=
-----END PUBLIC KEY-----
`
	rfc8410Public = "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"
)

// TestMarshalPrivateKey checks that keygen's PEM is the PKCS#8 encoding
// other tools write (RFC 8410's example, re-encoded, comes out byte for
// byte) and that it reads back as the same key.
func TestMarshalPrivateKey(t *testing.T) {
	block, _ := pem.Decode([]byte(rfc8410Key))
	seed := block.Bytes[len(block.Bytes)-ed25519.SeedSize:]
	got, err := grant.MarshalPrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rfc8410Key, string(got)); diff != "" {
		t.Errorf("MarshalPrivateKey(RFC 8410's key): -want, +got:\n%s", diff)
	}
	back, oldHex, err := grant.ReadPrivateKey(got)
	if err != nil || oldHex || !back.Equal(ed25519.NewKeyFromSeed(seed)) {
		t.Errorf("ReadPrivateKey(MarshalPrivateKey(k)) = another key, old hex %v, %v", oldHex, err)
	}
	if _, err := grant.MarshalPrivateKey(ed25519.PrivateKey("short")); err == nil {
		t.Error("MarshalPrivateKey of 5 bytes: want an error")
	}
}

func TestReadPrivateKey(t *testing.T) {
	ownerPEM, err := grant.MarshalPrivateKey(claimstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	seedHex := grant.FormatPrivateKey(claimstest.Owner)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	type want struct {
		Public string
		OldHex bool
	}
	cases := map[string]struct {
		reason  string
		in      string
		want    want
		wantErr error
	}{
		"PKCS8": {
			reason: "What keygen writes.",
			in:     string(ownerPEM), want: want{Public: claimstest.PublicHex(claimstest.Owner)},
		},
		"OtherTool": {
			reason: "What openssl genpkey -algorithm ed25519 writes: RFC 8410's example.",
			in:     rfc8410Key, want: want{Public: rfc8410Public},
		},
		"CRLF": {
			reason: "A PEM file saved with Windows line ends.",
			in:     strings.ReplaceAll(rfc8410Key, "\n", "\r\n"), want: want{Public: rfc8410Public},
		},
		"OldHexSeed": {
			reason: "What earlier versions of keygen wrote is still read, and said to be old.",
			in:     seedHex + "\n", want: want{Public: claimstest.PublicHex(claimstest.Owner), OldHex: true},
		},
		"OldHexFull": {
			reason: "Go's 64-byte form in hex, seed then public key, is still read too.",
			in:     seedHex + claimstest.PublicHex(claimstest.Owner), want: want{Public: claimstest.PublicHex(claimstest.Owner), OldHex: true},
		},
		"PublicKeyHex": {
			reason: "A public key as keygen prints it has the seed's 64 characters; it is named as a public key, never signed with.",
			in:     claimstest.PublicHex(claimstest.Owner) + "\n", wantErr: grant.ErrPublicKey,
		},
		"OtherPublicKeyHex": {
			reason: "Any sound public key, not only this project's.",
			in:     rfc8410Public, wantErr: grant.ErrPublicKey,
		},
		"PublicKeyPEM": {
			reason: "What openssl pkey -pubout writes.",
			in:     rfc8410PublicPEM, wantErr: grant.ErrPublicKey,
		},
		"ECDSA": {
			reason: "A PKCS#8 key of another algorithm.",
			in:     pemOf("PRIVATE KEY", ecDER), wantErr: grant.ErrMalformedPrivateKey,
		},
		"Encrypted": {
			reason: "An encrypted PKCS#8 key is not decrypted here.",
			in:     pemOf("ENCRYPTED PRIVATE KEY", ecDER), wantErr: grant.ErrMalformedPrivateKey,
		},
		"Certificate": {
			reason: "A certificate is no key.",
			in:     pemOf("CERTIFICATE", ecDER), wantErr: grant.ErrMalformedPrivateKey,
		},
		"NotDER": {
			reason: "A PRIVATE KEY block whose bytes are not PKCS#8.",
			in:     pemOf("PRIVATE KEY", []byte("not der")), wantErr: grant.ErrMalformedPrivateKey,
		},
		"TwoBlocks": {
			reason: "One key per file.",
			in:     string(ownerPEM) + rfc8410Key, wantErr: grant.ErrMalformedPrivateKey,
		},
		"Empty": {
			reason: "Nothing.",
			in:     "", wantErr: grant.ErrMalformedPrivateKey,
		},
		"HexOfAnotherLength": {
			reason: "Neither 32 nor 64 bytes of hex.",
			in:     seedHex[:40], wantErr: grant.ErrMalformedPrivateKey,
		},
		"MismatchedHalves": {
			reason: "The 64-byte form with another key's public half.",
			in:     seedHex + claimstest.PublicHex(claimstest.Stranger), wantErr: grant.ErrMalformedPrivateKey,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			priv, oldHex, err := grant.ReadPrivateKey([]byte(tc.in))
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nReadPrivateKey() error: -want, +got:\n%s", tc.reason, diff)
			}
			var got want
			if err == nil {
				got = want{Public: hex.EncodeToString(priv.Public().(ed25519.PublicKey)), OldHex: oldHex}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nReadPrivateKey(): -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				for _, secret := range []string{seedHex, "MC4CAQAwBQYDK2VwBCIEI", strings.TrimSpace(tc.in)} {
					if len(secret) > 8 && strings.Contains(err.Error(), secret) {
						t.Errorf("ReadPrivateKey() error quotes the file: %v", err)
					}
				}
			}
		})
	}
}
