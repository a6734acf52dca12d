package grant_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

func TestParsePublicKey(t *testing.T) {
	good := claimstest.PublicHex(claimstest.Owner)
	type parseCase struct {
		reason  string
		in      string
		wantErr error
	}
	cases := map[string]parseCase{
		"Lower":      {reason: "Lower-case hex is what keygen prints.", in: good},
		"Upper":      {reason: "Hex is case-insensitive.", in: strings.ToUpper(good)},
		"Empty":      {reason: "Nothing is not a key.", in: "", wantErr: grant.ErrMalformedPublicKey},
		"Short":      {reason: "31 bytes is not a key.", in: good[:62], wantErr: grant.ErrMalformedPublicKey},
		"Long":       {reason: "33 bytes is not a key.", in: good + "00", wantErr: grant.ErrMalformedPublicKey},
		"NotHex":     {reason: "The length is right, the alphabet is not.", in: strings.Repeat("g", 64), wantErr: grant.ErrMalformedPublicKey},
		"Whitespace": {reason: "Values are exact; no trimming.", in: " " + good[1:], wantErr: grant.ErrMalformedPublicKey},
		"Base64":     {reason: "A base64 key is a common mistake.", in: base64.StdEncoding.EncodeToString(claimstest.Owner.Public().(ed25519.PublicKey)), wantErr: grant.ErrMalformedPublicKey},
		"NotAPoint":  {reason: "64 hex characters that decode to no point of the curve verify nothing; refused as malformed.", in: claimstest.NotAPointKey, wantErr: grant.ErrMalformedPublicKey},
	}
	for _, k := range claimstest.WeakKeys() {
		cases["Weak"+k.Name] = parseCase{reason: "Small-order and non-canonical points are weak, in either case of hex.", in: strings.ToUpper(k.Hex), wantErr: grant.ErrWeakPublicKey}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := grant.ParsePublicKey(tc.in)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nParsePublicKey(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseSignature(t *testing.T) {
	sig := bytes.Repeat([]byte{0xfb}, ed25519.SignatureSize)
	std := base64.StdEncoding.EncodeToString(sig)
	cases := map[string]struct {
		reason  string
		in      string
		want    []byte
		wantErr error
	}{
		"Std":        {reason: "Padded standard base64 is what sign writes.", in: std, want: sig},
		"RawStd":     {reason: "Unpadded standard base64 is accepted too.", in: strings.TrimRight(std, "="), want: sig},
		"URLSafe":    {reason: "The URL-safe alphabet is not.", in: base64.URLEncoding.EncodeToString(sig), wantErr: grant.ErrMalformedSignature},
		"Empty":      {reason: "Nothing is not a signature.", in: "", wantErr: grant.ErrMalformedSignature},
		"Short":      {reason: "63 bytes is not a signature.", in: base64.StdEncoding.EncodeToString(sig[:63]), wantErr: grant.ErrMalformedSignature},
		"Long":       {reason: "65 bytes is not a signature.", in: base64.StdEncoding.EncodeToString(append(sig, 0)), wantErr: grant.ErrMalformedSignature},
		"LineBreak":  {reason: "The decoder would skip a line break; we do not.", in: std[:40] + "\n" + std[41:], wantErr: grant.ErrMalformedSignature},
		"StrayBits":  {reason: "Non-canonical last characters are refused (Strict).", in: std[:85] + "x==", wantErr: grant.ErrMalformedSignature},
		"NotBase64":  {reason: "Right length, wrong alphabet.", in: strings.Repeat("*", 88), wantErr: grant.ErrMalformedSignature},
		"HexEncoded": {reason: "A hex signature is a common mistake.", in: strings.Repeat("ab", 64), wantErr: grant.ErrMalformedSignature},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := grant.ParseSignature(tc.in)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nParseSignature() err: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseSignature(): -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil && strings.Contains(err.Error(), tc.in) && tc.in != "" {
				t.Errorf("ParseSignature() error quotes its input: %v", err)
			}
		})
	}
}

func TestParsePrivateKey(t *testing.T) {
	seedHex := grant.FormatPrivateKey(claimstest.Owner)
	fullHex := seedHex + claimstest.PublicHex(claimstest.Owner)
	mismatched := seedHex + claimstest.PublicHex(claimstest.Stranger)
	cases := map[string]struct {
		reason  string
		in      string
		wantErr error
	}{
		"Seed":         {reason: "The seed is what earlier versions of keygen wrote.", in: seedHex + "\n"},
		"Full":         {reason: "Go's 64-byte form is accepted.", in: fullHex},
		"Mismatched":   {reason: "A public half from another key is refused.", in: mismatched, wantErr: grant.ErrMalformedPrivateKey},
		"WrongLength":  {reason: "Neither 32 nor 64 bytes.", in: seedHex[:40], wantErr: grant.ErrMalformedPrivateKey},
		"NotHex":       {reason: "Not hex.", in: strings.Repeat("q", 64), wantErr: grant.ErrMalformedPrivateKey},
		"PublicKeyHex": {reason: "A public key has the seed's length and parses here; ReadPrivateKey is what refuses it (TestReadPrivateKey).", in: claimstest.PublicHex(claimstest.Owner)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := grant.ParsePrivateKey(tc.in)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nParsePrivateKey(): -want, +got:\n%s", tc.reason, diff)
			}
			if err == nil && name != "PublicKeyHex" && !got.Equal(claimstest.Owner) {
				t.Errorf("%s\nParsePrivateKey(): got another key", tc.reason)
			}
			if err != nil && strings.Contains(err.Error(), seedHex) {
				t.Errorf("ParsePrivateKey() error quotes the key")
			}
		})
	}
}

func TestSignVerifiesWithParsedKey(t *testing.T) {
	pub, priv, err := grant.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := grant.ParsePrivateKey(grant.FormatPrivateKey(priv))
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"v1", "v2"} {
		sig, err := grant.Sign(sample(), version, parsed)
		if err != nil {
			t.Fatalf("Sign(%s): %v", version, err)
		}
		raw, err := grant.ParseSignature(sig)
		if err != nil {
			t.Fatalf("ParseSignature(Sign(%s)): %v", version, err)
		}
		msg, _ := sample().Message(version)
		if !ed25519.Verify(pub, msg, raw) {
			t.Errorf("Sign(%s): signature does not verify", version)
		}
	}
}

func TestDigest(t *testing.T) {
	sig := make([]byte, 64)
	for i := range sig {
		sig[i] = byte(i)
	}
	d := grant.Digest(sig)
	sum := sha256.Sum256(sig)
	if want := "sha256:" + hex.EncodeToString(sum[:]); d != want {
		t.Fatalf("Digest() = %s, want %s", d, want)
	}
	cases := map[string]struct {
		reason string
		in     string
		want   error
	}{
		"Digest":       {reason: "What Digest writes parses.", in: d},
		"NoPrefix":     {reason: "The algorithm is part of the name.", in: d[len("sha256:"):], want: grant.ErrMalformedDigest},
		"UpperCase":    {reason: "One spelling per digest, so a list compares by string.", in: strings.ToUpper(d[:7]) + d[7:], want: grant.ErrMalformedDigest},
		"UpperHex":     {reason: "Lowercase hex only.", in: "sha256:" + strings.ToUpper(d[7:]), want: grant.ErrMalformedDigest},
		"Short":        {reason: "32 bytes, not fewer.", in: d[:len(d)-2], want: grant.ErrMalformedDigest},
		"NotHex":       {reason: "Hex digits only.", in: d[:len(d)-1] + "g", want: grant.ErrMalformedDigest},
		"TheSignature": {reason: "A signature pasted where its digest belongs.", in: grant.FormatSignature(sig), want: grant.ErrMalformedDigest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := grant.ParseDigest(tc.in)
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nParseDigest(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
