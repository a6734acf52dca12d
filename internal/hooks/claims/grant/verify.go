package grant

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"

	"filippo.io/edwards25519"
)

// ErrWeakPublicKey is wrapped by the errors about a public key that is a
// point of the curve but must never be trusted: a point of small order
// (with such a key, signatures can be made without any private key) or a
// non-canonical encoding of a point.
var ErrWeakPublicKey = errors.New("weak public key")

// CheckPublicKey reports whether pub may verify grants: 32 bytes that are
// the canonical encoding (RFC 8032, section 5.1.2) of a point of the
// curve whose order is not small. The error wraps ErrMalformedPublicKey
// when pub is no point at all and ErrWeakPublicKey when it is a point that
// must not be trusted.
//
// Why small order matters: Go's ed25519.Verify, like RFC 8032 itself,
// accepts any point as a public key. For a point A of order 1, 2, 4 or 8,
// [k]A is one of those eight points whatever the message hash k is, so
// the signature R = -[k]A, S = 0 satisfies [S]B = R + [k]A: for the
// identity (hex 01 then 62 zeros) R = identity, S = 0 verifies every
// message. No key made by GenerateKey is ever such a point; only a key
// written by hand, by mistake or on purpose, is.
func CheckPublicKey(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: want %d bytes, got %d", ErrMalformedPublicKey, ed25519.PublicKeySize, len(pub))
	}
	switch checkPoint(pub) {
	case errNotAPoint:
		return fmt.Errorf("%w: not a point of the ed25519 curve", ErrMalformedPublicKey)
	case errNonCanonical:
		return fmt.Errorf("%w: not the canonical encoding of its point", ErrWeakPublicKey)
	case errSmallOrder:
		return fmt.Errorf("%w: a point of small order, with which signatures verify that no private key made", ErrWeakPublicKey)
	}
	return nil
}

// Verify reports whether sig is a valid signature of msg by pub. It is
// RFC 8032's cofactorless verification ([S]B = R + [k]A, as Go's
// ed25519.Verify does it), made strict on both points:
//
//   - A, the public key, passes CheckPublicKey: canonical, not of small
//     order. This is what stops forgeries (see CheckPublicKey).
//   - R, the first half of the signature, is canonical and not of small
//     order. Go already refuses a non-canonical R (it compares R with the
//     canonical encoding of [S]B - [k]A) and an honest signer never makes a
//     small-order R (R = [r]B); refusing it too means that no accepted
//     signature holds a point an attacker could pick for free.
//   - S, the second half, is below the group order L: Go's ed25519.Verify
//     refuses any other (SetCanonicalBytes), so a signature has no second
//     form S + L.
//
// Cofactorless, because it is what Go's verifier and most others do, so
// that "formspec-hooks claim verify", the hook and any other tool the
// owner checks a grant with agree on every honest signature; the cases in
// which the cofactored equation differs need a small-order component in A
// or R, and the checks above refuse the small-order points themselves.
// A key of mixed order (a prime-order point plus a small-order one) is not
// refused: only its owner can sign with it, and keys from GenerateKey
// never have that form.
func Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || CheckPublicKey(pub) != nil || checkPoint(sig[:32]) != nil {
		return false
	}
	// The same bytes verify the same way every time (memo.go).
	k := verificationKey(pub, msg, sig)
	if ok, seen := verifications.get(k); seen {
		return ok
	}
	ok := ed25519.Verify(pub, msg, sig)
	verifications.put(k, ok)
	return ok
}

var (
	errNotAPoint    = errors.New("not a point")
	errNonCanonical = errors.New("non-canonical encoding")
	errSmallOrder   = errors.New("small order")
)

// identity is the neutral point, which [8]P is exactly when P has small
// order: the curve's group is a prime-order group times a group of order 8.
var identity = edwards25519.NewIdentityPoint()

// checkPoint decodes a 32-byte point encoding and reports whether it is
// no point, not the canonical encoding of its point (a y coordinate of p
// or more, or a sign bit set on x = 0), or a point of small order. The
// decoder accepts non-canonical encodings, hence the comparison with the
// re-encoded point. b must be 32 bytes; the outcome is remembered
// (memo.go).
func checkPoint(b []byte) error {
	k := [32]byte(b)
	if err, ok := points.get(k); ok {
		return err
	}
	err := decodePoint(b)
	points.put(k, err)
	return err
}

func decodePoint(b []byte) error {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return errNotAPoint
	}
	if !bytes.Equal(p.Bytes(), b) {
		return errNonCanonical
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(identity) == 1 {
		return errSmallOrder
	}
	return nil
}
