package grant

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"

	"filippo.io/edwards25519"
)

// ErrPublicKey is what ReadPrivateKey says of a public key given where a
// private key belongs: the two look alike as 64 hexadecimal characters,
// and signing with a public key as if it were a seed gives grants no
// Datastore accepts.
var ErrPublicKey = errors.New("a public key, not a private key")

// pemPrivateKey is the PEM type of a PKCS#8 private key.
const pemPrivateKey = "PRIVATE KEY"

// MarshalPrivateKey writes a private key as an unencrypted PKCS#8 PEM
// block ("-----BEGIN PRIVATE KEY-----"), the form
// `openssl genpkey -algorithm ed25519` writes and every tool reads.
func MarshalPrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: want %d bytes", ErrMalformedPrivateKey, ed25519.PrivateKeySize)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ReadPrivateKey reads a private key file: one PKCS#8 PEM block holding an
// ed25519 key, as MarshalPrivateKey and openssl write it. It still reads
// what earlier versions of "claim keygen" wrote, the hex of the 32-byte
// seed (or of Go's 64-byte seed-then-public form), and then reports
// oldHex, so that the caller can ask for the file to be converted.
//
// Anything else is refused with an error that says what the file holds,
// wrapping ErrPublicKey for a public key (a PEM "PUBLIC KEY", or 64
// hexadecimal characters that encode a sound ed25519 public key: see
// looksLikePublicKey) and ErrMalformedPrivateKey otherwise. No error quotes
// the file.
func ReadPrivateKey(data []byte) (priv ed25519.PrivateKey, oldHex bool, err error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return readHexKey(data)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, false, fmt.Errorf("%w: more than one PEM block, or text after it; want one PKCS#8 %q block", ErrMalformedPrivateKey, pemPrivateKey)
	}
	switch block.Type {
	case pemPrivateKey:
	case "PUBLIC KEY":
		return nil, false, fmt.Errorf("%w: a PEM PUBLIC KEY block", ErrPublicKey)
	case "ENCRYPTED PRIVATE KEY":
		return nil, false, fmt.Errorf("%w: an encrypted PKCS#8 key; decrypt it first (openssl pkey -in KEY -out PLAIN)", ErrMalformedPrivateKey)
	case "CERTIFICATE":
		return nil, false, fmt.Errorf("%w: a certificate", ErrMalformedPrivateKey)
	case "OPENSSH PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		return nil, false, fmt.Errorf("%w: a PEM %s block, not PKCS#8 ed25519", ErrMalformedPrivateKey, block.Type)
	default:
		return nil, false, fmt.Errorf("%w: a PEM block of another type; want one PKCS#8 %q block", ErrMalformedPrivateKey, pemPrivateKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("%w: the PRIVATE KEY block is not PKCS#8 DER", ErrMalformedPrivateKey)
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return k, false, nil
	case *rsa.PrivateKey:
		return nil, false, fmt.Errorf("%w: an RSA key; claims are signed with ed25519 (openssl genpkey -algorithm ed25519)", ErrMalformedPrivateKey)
	case *ecdsa.PrivateKey:
		return nil, false, fmt.Errorf("%w: an ECDSA key; claims are signed with ed25519 (openssl genpkey -algorithm ed25519)", ErrMalformedPrivateKey)
	case *ecdh.PrivateKey:
		return nil, false, fmt.Errorf("%w: an X25519 or ECDH key; claims are signed with ed25519 (openssl genpkey -algorithm ed25519)", ErrMalformedPrivateKey)
	}
	return nil, false, fmt.Errorf("%w: not an ed25519 key", ErrMalformedPrivateKey)
}

// readHexKey reads the old hex forms. A seed and a public key are both 32
// bytes, 64 hexadecimal characters; a public key is refused when the bytes
// encode a sound ed25519 public key, which every public key does and a
// random seed does one time in sixteen (see looksLikePublicKey). The
// 64-byte form carries its public half, which must belong to its seed,
// and is never mistaken for a public key.
func readHexKey(data []byte) (ed25519.PrivateKey, bool, error) {
	s := string(bytes.TrimSpace(data))
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != ed25519.SeedSize && len(b) != ed25519.PrivateKeySize) {
		return nil, false, fmt.Errorf("%w: neither a PKCS#8 PEM private key nor the hex key of an earlier keygen", ErrMalformedPrivateKey)
	}
	if len(b) == ed25519.SeedSize && looksLikePublicKey(b) {
		return nil, false, fmt.Errorf("%w: 64 hexadecimal characters that encode an ed25519 public key, as keygen prints for spec.ownerPublicKey", ErrPublicKey)
	}
	priv, err := ParsePrivateKey(s)
	return priv, err == nil, err
}

// looksLikePublicKey reports whether b encodes a sound ed25519 public key:
// the canonical encoding of a point of the prime-order subgroup, not of
// small order. Every public key keygen or any ed25519 library makes is one.
// Thirty-two random bytes are one in about sixteen: half of all encodings
// are points of the curve, and one point in eight lies in that subgroup.
func looksLikePublicKey(b []byte) bool {
	if CheckPublicKey(b) != nil {
		return false
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return false
	}
	// p is in the prime-order subgroup exactly when clearing its cofactor
	// (times 8) and undoing that (times 8's inverse modulo the order)
	// gives p back: any small-order part is lost on the way.
	eight, err := edwards25519.NewScalar().SetCanonicalBytes(append([]byte{8}, make([]byte, 31)...))
	if err != nil {
		return false
	}
	inv := edwards25519.NewScalar().Invert(eight)
	q := new(edwards25519.Point).ScalarMult(inv, new(edwards25519.Point).MultByCofactor(p))
	return q.Equal(p) == 1
}
