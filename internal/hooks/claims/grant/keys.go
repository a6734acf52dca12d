package grant

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Errors for malformed keys and signatures. Messages built on them give
// lengths and formats, never the bytes: a public key is harmless, but a
// private key or a signature pasted into the wrong field must not end up
// in a status or a log line.
var (
	ErrMalformedPublicKey  = errors.New("malformed public key")
	ErrMalformedPrivateKey = errors.New("malformed private key")
	ErrMalformedSignature  = errors.New("malformed signature")
)

// ParsePublicKey parses an ed25519 public key written as exactly 64
// hexadecimal characters (either case), with nothing around them, and
// refuses any key CheckPublicKey refuses: the error wraps
// ErrMalformedPublicKey or ErrWeakPublicKey.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	if len(s) != 2*ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: want %d hexadecimal characters, got %d characters", ErrMalformedPublicKey, 2*ed25519.PublicKeySize, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not hexadecimal", ErrMalformedPublicKey)
	}
	if err := CheckPublicKey(b); err != nil {
		return nil, err
	}
	return ed25519.PublicKey(b), nil
}

// FormatPublicKey writes a public key the way Datastores carry it:
// lower-case hex.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return hex.EncodeToString(pub)
}

// ParseSignature parses a base64 ed25519 signature (64 bytes). Two
// spellings are accepted: standard base64 with padding (88 characters, what
// "formspec-hooks claim sign" writes), and the same alphabet without padding
// (86 characters), which some tools produce and which people get when they
// trim the "==" off. Both decode strictly: no whitespace, no URL-safe
// alphabet, no stray bits in the last character, so one signature has
// exactly two spellings and nothing else passes.
func ParseSignature(s string) ([]byte, error) {
	var enc *base64.Encoding
	switch len(s) {
	case base64.StdEncoding.EncodedLen(ed25519.SignatureSize):
		enc = base64.StdEncoding.Strict()
	case base64.RawStdEncoding.EncodedLen(ed25519.SignatureSize):
		enc = base64.RawStdEncoding.Strict()
	default:
		return nil, fmt.Errorf("%w: want %d base64 characters (or %d without padding) for %d bytes, got %d characters",
			ErrMalformedSignature, base64.StdEncoding.EncodedLen(ed25519.SignatureSize),
			base64.RawStdEncoding.EncodedLen(ed25519.SignatureSize), ed25519.SignatureSize, len(s))
	}
	// The decoder skips '\r' and '\n'; a signature holds neither.
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: contains a line break", ErrMalformedSignature)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64", ErrMalformedSignature)
	}
	if len(b) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: want %d bytes, got %d", ErrMalformedSignature, ed25519.SignatureSize, len(b))
	}
	return b, nil
}

// FormatSignature writes a signature as padded standard base64.
func FormatSignature(sig []byte) string {
	return base64.StdEncoding.EncodeToString(sig)
}

// GenerateKey makes a new ed25519 key pair from rand (crypto/rand when
// nil). It never returns a public key that CheckPublicKey refuses.
func GenerateKey(rand io.Reader) (ed25519.PublicKey, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot generate an ed25519 key: %w", err)
	}
	// Cannot fail: the public key is the base point (of prime order L)
	// times a scalar that is a multiple of 8 between 2^254 and 2^255, never
	// a multiple of L. Checked anyway, so that keygen's promise does not
	// rest on that argument alone.
	if err := CheckPublicKey(pub); err != nil {
		return nil, nil, fmt.Errorf("generated key refused: %w", err)
	}
	return pub, priv, nil
}

// FormatPrivateKey writes a private key as the hex of its 32-byte seed,
// the form earlier versions of "claim keygen" wrote and ParsePrivateKey
// reads. Key files are now PKCS#8 PEM (MarshalPrivateKey): as hex, a seed
// looks just like the public key next to it.
func FormatPrivateKey(priv ed25519.PrivateKey) string {
	return hex.EncodeToString(priv.Seed())
}

// ParsePrivateKey reads a private key in the old hex form: the hex of a
// 32-byte seed, or of Go's 64-byte private key form (seed then public key),
// in which case the public half must match the seed. Surrounding
// whitespace is ignored, since editors add a final newline. It cannot tell
// a seed from a public key; key files are read with ReadPrivateKey, which
// can.
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not hexadecimal", ErrMalformedPrivateKey)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		priv := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(b[ed25519.SeedSize:])) {
			return nil, fmt.Errorf("%w: the public half does not belong to the seed", ErrMalformedPrivateKey)
		}
		return priv, nil
	default:
		return nil, fmt.Errorf("%w: want %d or %d hexadecimal characters, got %d", ErrMalformedPrivateKey, 2*ed25519.SeedSize, 2*ed25519.PrivateKeySize, len(s))
	}
}

// Sign signs a grant under a signature version and returns the signature
// as padded standard base64.
func Sign(g Grant, version string, priv ed25519.PrivateKey) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("%w: want %d bytes", ErrMalformedPrivateKey, ed25519.PrivateKeySize)
	}
	msg, err := g.Message(version)
	if err != nil {
		return "", err
	}
	return FormatSignature(ed25519.Sign(priv, msg)), nil
}

// DigestPrefix starts every signature digest.
const DigestPrefix = "sha256:"

// Digest names a grant for revocation: DigestPrefix and the hex SHA-256 of
// its signature's 64 bytes. A signature has two spellings (ParseSignature)
// and one digest, so a revoked grant cannot come back by losing its
// padding. A digest is not the signature: it cannot be used as one, so it
// may appear where signature bytes must not (a Datastore's spec, a claim's
// status message, a log line).
func Digest(sig []byte) string {
	sum := sha256.Sum256(sig)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// ErrMalformedDigest is wrapped by the errors of ParseDigest.
var ErrMalformedDigest = errors.New("malformed signature digest")

// ParseDigest checks the form of a signature digest, DigestPrefix and 64
// lowercase hex digits, as Digest writes it, and returns it.
func ParseDigest(s string) (string, error) {
	hexPart, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok || len(hexPart) != 2*sha256.Size || strings.ToLower(hexPart) != hexPart {
		return "", fmt.Errorf("%w: want %q and %d lowercase hex digits", ErrMalformedDigest, DigestPrefix, 2*sha256.Size)
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", fmt.Errorf("%w: want %q and %d lowercase hex digits", ErrMalformedDigest, DigestPrefix, 2*sha256.Size)
	}
	return s, nil
}
