package claims

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// Options are the install's choices that Verify applies beside each
// Datastore's own spec.grantPolicy. The zero value is the default install.
type Options struct {
	// AcceptV1 accepts v1 grants for every Datastore, as a Datastore's
	// spec.grantPolicy.acceptV1Signatures does for its own (formspec-hooks
	// serve --accept-v1-grants). For a cluster moving from the original
	// operator, until its grants are signed again as v2.
	AcceptV1 bool
}

// policy is a Datastore's spec.grantPolicy, parsed.
type policy struct {
	acceptV1 bool
	// maxLifetime is zero for no limit; maxLifetimeText is it as written.
	maxLifetime     time.Duration
	maxLifetimeText string
	// revokedBefore is zero when no date is revoked.
	revokedBefore time.Time
	// revoked holds the revoked signature digests.
	revoked map[string]bool
}

// parsePolicy parses a Datastore's grant policy. The error names the field
// that does not parse; a nil policy is the zero one.
func parsePolicy(p *v1alpha1.GrantPolicy) (policy, error) {
	var out policy
	if p == nil {
		return out, nil
	}
	out.acceptV1 = p.AcceptV1Signatures
	if p.MaxLifetime != "" {
		d, err := time.ParseDuration(p.MaxLifetime)
		if err != nil || d <= 0 {
			return policy{}, fmt.Errorf("spec.grantPolicy.maxLifetime %q is not a positive duration such as 2160h", p.MaxLifetime)
		}
		out.maxLifetime, out.maxLifetimeText = d, p.MaxLifetime
	}
	if p.RevokedBefore != "" {
		t, err := time.Parse(time.RFC3339, p.RevokedBefore)
		if err != nil {
			return policy{}, fmt.Errorf("spec.grantPolicy.revokedBefore %q is not an RFC 3339 time", p.RevokedBefore)
		}
		out.revokedBefore = t
	}
	if n := len(p.RevokedSignatures); n > v1alpha1.MaxRevokedSignatures {
		return policy{}, fmt.Errorf("spec.grantPolicy.revokedSignatures has %d entries, more than the %d allowed; revoke older grants with revokedBefore", n, v1alpha1.MaxRevokedSignatures)
	}
	for i, s := range p.RevokedSignatures {
		d, err := grant.ParseDigest(s)
		if err != nil {
			return policy{}, fmt.Errorf("spec.grantPolicy.revokedSignatures[%d]: %w (formspec-hooks claim digest prints it)", i, err)
		}
		if out.revoked == nil {
			out.revoked = make(map[string]bool, len(p.RevokedSignatures))
		}
		out.revoked[d] = true
	}
	return out, nil
}

// end is when a grant of these times stops being valid under the policy:
// its expiresAt, or grantedAt plus maxLifetime when that comes first. capped
// reports that the lifetime decided it. Zero when the grant never ends.
func (p policy) end(t grant.Times) (end time.Time, capped bool) {
	end = t.ExpiresAt
	if p.maxLifetime > 0 {
		limit := t.GrantedAt.Add(p.maxLifetime)
		if end.IsZero() || limit.Before(end) {
			return limit, true
		}
	}
	return end, false
}

// pinnedKeys parses the owner keys an endpoint Secret pins
// (v1alpha1.AnnotationOwnerPublicKeys), as their lowercase hex. ok is false
// when the Secret pins none.
func pinnedKeys(secret *corev1.Secret) (keys map[string]bool, ok bool, err error) {
	raw, ok := secret.Annotations[v1alpha1.AnnotationOwnerPublicKeys]
	if !ok {
		return nil, false, nil
	}
	fields := strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if len(fields) == 0 {
		return nil, true, fmt.Errorf("its annotation %s lists no key", v1alpha1.AnnotationOwnerPublicKeys)
	}
	// A Datastore lists at most 1 + MaxOwnerPublicKeys keys; a Secret may
	// pin a few more, for a rotation under way, but not without bound.
	if limit := 2 * (1 + v1alpha1.MaxOwnerPublicKeys); len(fields) > limit {
		return nil, true, fmt.Errorf("its annotation %s lists %d keys, more than the %d allowed", v1alpha1.AnnotationOwnerPublicKeys, len(fields), limit)
	}
	keys = make(map[string]bool, len(fields))
	for i, f := range fields {
		k, err := grant.ParsePublicKey(f)
		if err != nil {
			return nil, true, fmt.Errorf("key %d of its annotation %s: %w", i+1, v1alpha1.AnnotationOwnerPublicKeys, err)
		}
		keys[grant.FormatPublicKey(k)] = true
	}
	return keys, true, nil
}
