// Package grant is the cryptography of ResourceClaims, and nothing else:
// which fields of a claim a signature covers and the bytes it signs (v1 and
// v2), the spelling of keys and signatures, signing, and the one
// verification rule every grant is held to (Verify). It is the
// security-critical core of package claims, kept small enough to read in
// one sitting; what a verified grant is then allowed to receive (tenants,
// dates, the Datastore and its Secret) is decided in package claims.
//
// Nothing here reads a clock or the network. Nothing here returns a
// private key or signature bytes in an error: those end up in statuses,
// Events and logs.
package grant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// V2Domain is the first field of every v2 message. It separates grant
// signatures from anything else the same key might ever sign, and from
// future message versions.
const V2Domain = "formspec.dev/grant/v2"

// ErrInvalidGrant is wrapped by every error about a grant's fields.
var ErrInvalidGrant = errors.New("invalid grant")

// Grant is the part of a ResourceClaim that a signature covers, after the
// one default the signature binds: DatastoreNamespace falls back to the
// claim's namespace. Every other value is exactly as written in the claim.
type Grant struct {
	DatastoreNamespace string
	DatastoreName      string
	ClaimNamespace     string
	Workspace          string
	Permission         string
	GrantedBy          string
	GrantedAt          string
	ExpiresAt          string
}

// Of extracts the signed fields of a claim.
func Of(c *v1alpha1.ResourceClaim) Grant {
	dsNamespace := c.Spec.Datastore.Namespace
	if dsNamespace == "" {
		dsNamespace = c.Namespace
	}
	return Grant{
		DatastoreNamespace: dsNamespace,
		DatastoreName:      c.Spec.Datastore.Name,
		ClaimNamespace:     c.Namespace,
		Workspace:          c.Spec.Workspace,
		Permission:         c.Spec.Permission,
		GrantedBy:          c.Spec.GrantedBy,
		GrantedAt:          c.Spec.GrantedAt,
		ExpiresAt:          c.Spec.ExpiresAt,
	}
}

// Version returns the claim's signature version with the default applied:
// v1, because claims written for the original operator carry no version.
func Version(c *v1alpha1.ResourceClaim) string {
	if c.Spec.SignatureVersion == "" {
		return v1alpha1.SignatureV1
	}
	return c.Spec.SignatureVersion
}

// Times holds a grant's parsed timestamps. ExpiresAt is zero when the
// grant does not expire.
type Times struct {
	GrantedAt time.Time
	ExpiresAt time.Time
}

// Check reports whether the grant can be signed or verified under a
// signature version, and returns its parsed timestamps. The returned error
// wraps ErrInvalidGrant and names the offending field, never its value.
func (g Grant) Check(version string) (Times, error) {
	fields := []struct{ name, value string }{
		{"spec.datastore.namespace", g.DatastoreNamespace},
		{"spec.datastore.name", g.DatastoreName},
		{"metadata.namespace", g.ClaimNamespace},
		{"spec.workspace", g.Workspace},
		{"spec.permission", g.Permission},
		{"spec.grantedBy", g.GrantedBy},
		{"spec.grantedAt", g.GrantedAt},
		{"spec.expiresAt", g.ExpiresAt},
	}
	for _, f := range fields {
		// Control characters and broken UTF-8 have no business in names or
		// timestamps, and they could forge lines in a log or a terminal
		// that shows the grant. Rejected in every version.
		if !utf8.ValidString(f.value) || strings.ContainsFunc(f.value, unicode.IsControl) {
			return Times{}, fmt.Errorf("%w: %s contains a control character or invalid UTF-8", ErrInvalidGrant, f.name)
		}
		// v1 joins fields with "|". If a field could contain one, the grant
		// {workspace "a|read", permission "x"} and {workspace "a", permission
		// "read|x"} would share a message, and one signature would serve
		// both. v2 length-prefixes every field and has no such problem.
		if version == v1alpha1.SignatureV1 && strings.Contains(f.value, "|") {
			return Times{}, fmt.Errorf("%w: %s contains \"|\", which a v1 signature cannot tell apart from a field boundary", ErrInvalidGrant, f.name)
		}
	}
	required := []struct{ name, value string }{
		{"spec.datastore.name", g.DatastoreName},
		{"spec.workspace", g.Workspace},
		{"spec.permission", g.Permission},
		{"spec.grantedBy", g.GrantedBy},
		{"spec.grantedAt", g.GrantedAt},
	}
	if version == v1alpha1.SignatureV2 {
		// v2 binds the claim to its namespace; without one there is
		// nothing to bind to.
		required = append(required, struct{ name, value string }{"metadata.namespace", g.ClaimNamespace})
	}
	for _, f := range required {
		if f.value == "" {
			return Times{}, fmt.Errorf("%w: %s is empty", ErrInvalidGrant, f.name)
		}
	}
	if !slices.Contains([]string{v1alpha1.PermissionRead, v1alpha1.PermissionReadWrite, v1alpha1.PermissionAdmin}, g.Permission) {
		return Times{}, fmt.Errorf("%w: spec.permission must be one of read, readwrite, admin", ErrInvalidGrant)
	}
	var t Times
	var err error
	if t.GrantedAt, err = time.Parse(time.RFC3339, g.GrantedAt); err != nil {
		return Times{}, fmt.Errorf("%w: spec.grantedAt is not an RFC 3339 time", ErrInvalidGrant)
	}
	if g.ExpiresAt != "" {
		if t.ExpiresAt, err = time.Parse(time.RFC3339, g.ExpiresAt); err != nil {
			return Times{}, fmt.Errorf("%w: spec.expiresAt is not an RFC 3339 time", ErrInvalidGrant)
		}
		if !t.ExpiresAt.After(t.GrantedAt) {
			return Times{}, fmt.Errorf("%w: spec.expiresAt is not after spec.grantedAt", ErrInvalidGrant)
		}
	}
	return t, nil
}

// Message returns the bytes a signature of the given version covers. It
// checks the grant first, so a grant that could be ambiguous is never
// signed or verified.
func (g Grant) Message(version string) ([]byte, error) {
	if version != v1alpha1.SignatureV1 && version != v1alpha1.SignatureV2 {
		return nil, fmt.Errorf("%w: unknown signature version", ErrUnknownVersion)
	}
	if _, err := g.Check(version); err != nil {
		return nil, err
	}
	if version == v1alpha1.SignatureV1 {
		return MessageV1(g), nil
	}
	return MessageV2(g), nil
}

// ErrUnknownVersion is returned for a signature version other than v1 or v2.
var ErrUnknownVersion = errors.New("unknown signature version")

// MessageV1 is the message of the original operator:
// "datastore|workspace|permission|grantedBy|grantedAt". It binds neither
// namespace nor expiry. It does not check the grant: use Message.
func MessageV1(g Grant) []byte {
	return []byte(strings.Join([]string{g.DatastoreName, g.Workspace, g.Permission, g.GrantedBy, g.GrantedAt}, "|"))
}

// MessageV2 is the PASETO-style pre-authentication encoding (PAE) of the
// domain and every grant field: the field count, then each field's length
// and bytes, counts and lengths as little-endian uint64. Because every
// field carries its length, no two different grants share a message,
// whatever bytes the fields hold. It does not check the grant: use Message.
func MessageV2(g Grant) []byte {
	return PAE(V2Domain, g.DatastoreNamespace, g.DatastoreName, g.ClaimNamespace,
		g.Workspace, g.Permission, g.GrantedBy, g.GrantedAt, g.ExpiresAt)
}

// PAE is the pre-authentication encoding of MessageV2: the field count,
// then each field's length and bytes, counts and lengths as little-endian
// uint64. Exported for the other digests that must not let two different
// inputs share an encoding (claims.CredentialsHash).
func PAE(fields ...string) []byte {
	n := 8
	for _, f := range fields {
		n += 8 + len(f)
	}
	out := make([]byte, 0, n)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(fields)))
	for _, f := range fields {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(f)))
		out = append(out, f...)
	}
	return out
}
