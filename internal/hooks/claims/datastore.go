package claims

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// PublicKeys parses every owner key of a Datastore, ownerPublicKey first.
func PublicKeys(ds *v1alpha1.Datastore) ([][]byte, error) {
	var raw []string
	if ds.Spec.OwnerPublicKey != "" {
		raw = append(raw, ds.Spec.OwnerPublicKey)
	}
	if n := len(ds.Spec.OwnerPublicKeys); n > v1alpha1.MaxOwnerPublicKeys {
		return nil, fmt.Errorf("%w: spec.ownerPublicKeys has %d entries, more than the %d allowed", grant.ErrMalformedPublicKey, n, v1alpha1.MaxOwnerPublicKeys)
	}
	raw = append(raw, ds.Spec.OwnerPublicKeys...)
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: the Datastore has neither ownerPublicKey nor ownerPublicKeys", grant.ErrMalformedPublicKey)
	}
	keys := make([][]byte, 0, len(raw))
	for i, s := range raw {
		k, err := grant.ParsePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("owner key %d of %d: %w", i+1, len(raw), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// CheckDatastore validates a Datastore and its endpoint Secret (nil when
// not found). It checks the spec first, so a Datastore that is wrong on its
// own says so even before its Secret exists. The message never quotes a
// Secret value, but it does name the Secret, the keys it lacks and a
// malformed allowedTenants entry: it is written for the Datastore's own
// status, and Verify only passes it on to a claim whose signature, tenant
// and dates have all been accepted.
func CheckDatastore(ds *v1alpha1.Datastore, secret *corev1.Secret) Decision {
	deny := func(reason, format string, args ...any) Decision {
		return Decision{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if requiredKeys[ds.Spec.Driver] == nil {
		return deny(v1alpha1.ReasonUnsupportedDriver, "spec.driver %q is not one of postgres, mysql, redis, mongodb", ds.Spec.Driver)
	}
	keys, err := PublicKeys(ds)
	if err != nil {
		// One weak key refuses the whole Datastore, not just that key: the
		// Datastore would otherwise report Validated while listing a key
		// anyone can sign with, and its owner would not look.
		if errors.Is(err, grant.ErrWeakPublicKey) {
			return deny(v1alpha1.ReasonWeakPublicKey, "%v; such a key must never verify a grant: remove it, and list only keys made by formspec-hooks claim keygen", err)
		}
		return deny(v1alpha1.ReasonInvalidPublicKey, "%v; every owner key must be an ed25519 public key in 64 hexadecimal characters (formspec-hooks claim keygen prints one)", err)
	}
	if n := len(ds.Spec.AllowedTenants); n > v1alpha1.MaxAllowedTenants {
		return deny(v1alpha1.ReasonInvalidTenant, "spec.allowedTenants has %d entries, more than the %d allowed; use namespace/* entries", n, v1alpha1.MaxAllowedTenants)
	}
	for _, t := range ds.Spec.AllowedTenants {
		if err := CheckTenant(t); err != nil {
			return deny(v1alpha1.ReasonInvalidTenant, "spec.allowedTenants: %v", err)
		}
	}
	if _, err := parsePolicy(ds.Spec.GrantPolicy); err != nil {
		return deny(v1alpha1.ReasonInvalidGrantPolicy, "%v", err)
	}
	ref := ds.Spec.EndpointSecretRef.Name
	if ref == "" {
		return deny(v1alpha1.ReasonSecretNotFound, "spec.endpointSecretRef.name is empty")
	}
	if secret == nil || secret.Name != ref || secret.Namespace != ds.Namespace {
		return deny(v1alpha1.ReasonSecretNotFound, "Secret %s/%s named by spec.endpointSecretRef was not found", ds.Namespace, ref)
	}
	if secret.Labels[v1alpha1.LabelDatastore] != ds.Name {
		return deny(v1alpha1.ReasonSecretNotLabeled, "Secret %s/%s must carry the label %s=%s: the label is its owner's consent to having its data projected into claims",
			ds.Namespace, ref, v1alpha1.LabelDatastore, ds.Name)
	}
	// The label says the Secret may be projected; the pinned keys say for
	// whose grants. Without pins, whoever can edit the Datastore could list
	// a key of their own and sign themselves a grant.
	pinned, pins, err := pinnedKeys(secret)
	if err != nil {
		return deny(v1alpha1.ReasonOwnerKeyNotPinned, "Secret %s/%s pins owner keys, but %v; its owner must list the hex public keys it consents to", ds.Namespace, ref, err)
	}
	if pins {
		for i, k := range keys {
			if !pinned[grant.FormatPublicKey(k)] {
				return deny(v1alpha1.ReasonOwnerKeyNotPinned, "owner key %d of %d (%s) is not among the keys Secret %s/%s pins in its annotation %s; the Secret's owner must add it there before the Datastore may list it",
					i+1, len(keys), grant.FormatPublicKey(k), ds.Namespace, ref, v1alpha1.AnnotationOwnerPublicKeys)
			}
		}
	}
	var missing []string
	for _, p := range Permissions {
		for _, k := range missingKeys(secret.Data, ds.Spec.Driver, p) {
			missing = append(missing, p+":"+k)
		}
	}
	if len(missing) > 0 {
		return deny(v1alpha1.ReasonMissingKeys, "Secret %s/%s lacks keys a %s connection needs (permission:key): %s; set them unprefixed or as <permission>.<key>",
			ds.Namespace, ref, ds.Spec.Driver, strings.Join(missing, ", "))
	}
	return Decision{Allowed: true, Reason: v1alpha1.ReasonValidated,
		Message: fmt.Sprintf("Secret %s/%s holds a complete %s endpoint", ds.Namespace, ref, ds.Spec.Driver)}
}
