// Package claims holds the rules of ResourceClaims and Datastores, and
// nothing of their wiring: whether a claim may receive its Datastore's
// credentials (verify.go: Verify), whether a Datastore is valid
// (datastore.go: CheckDatastore), who may claim it (tenants.go), what a
// granted claim receives (projection.go: the drivers' keys, Project,
// CredentialsHash) and what a Datastore's status may show of its endpoint
// (endpoint.go). The cryptography it relies on, keys, signed messages and
// signature verification, is package grant; the hooks that serve these
// decisions to Metacontroller are packages datastore and resourceclaim.
//
// Nothing here reads a clock or the network; callers pass "now". Nothing
// here returns secret material or signature bytes in an error, a Decision
// or any other string: those end up in statuses, Events and logs.
package claims

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// MaxClockSkew is how far in the future a grantedAt may lie: enough for
// the owner's clock running a little ahead of the cluster's, not enough to
// pre-date grants that only become usable later.
const MaxClockSkew = 5 * time.Minute

// Decision is the outcome of a check. Reason is a stable CamelCase word;
// Message tells a person what to do, and never holds secret values or
// signature bytes.
type Decision struct {
	// Allowed is true when the claim is granted (or the Datastore valid).
	Allowed bool
	// Reason is one of the Reason constants.
	Reason string
	// Message explains the decision.
	Message string
	// RecheckAt is when the decision changes by itself, zero when it does
	// not: the expiry of a granted claim, or the moment a claim granted a
	// little too far in the future becomes acceptable.
	RecheckAt time.Time
	// LegacySignature is true when the claim is granted on a v1
	// signature, which binds no namespace (v1alpha1.ConditionLegacySignature).
	LegacySignature bool
}

// Verify decides whether a claim may receive its Datastore's credentials.
// ds and secret are nil when they were not found; secret is the Datastore's
// endpoint Secret. The checks run in a fixed order and stop at the first
// failure:
//
//  1. the grant's own form (signatureVersion, fields, timestamps);
//  2. the Datastore exists;
//  3. authenticity: the signature parses and verifies (grant.Verify)
//     against one of the Datastore's owner keys that grant.ParsePublicKey
//     accepts, and then every owner key must be accepted: a Datastore
//     listing a weak key is refused whole, even for grants signed by its
//     sound keys;
//  4. the signature version: a v1 grant only where the Datastore's
//     spec.grantPolicy.acceptV1Signatures or the install (opts.AcceptV1)
//     accepts one;
//  5. authorization: namespace/workspace is in allowedTenants;
//  6. revocation: the owner has not revoked the grant, by its date
//     (spec.grantPolicy.revokedBefore) or by its signature's digest
//     (spec.grantPolicy.revokedSignatures);
//  7. time: grantedAt within the clock skew; expiresAt, and grantedAt plus
//     the Datastore's spec.grantPolicy.maxLifetime, in the future;
//  8. the Datastore validates now, endpoint Secret included, with the
//     owner keys it pins (CheckDatastore).
//
// Anyone can write a claim in their own namespace naming any Datastore, so
// until step 3 passes a denial says no more than "the Datastore exists and
// the signature does not verify": nothing about its Secret (name, presence,
// label, keys), its tenants or its keys, not even that one of them is
// malformed. Tenants come before the Secret because a well-signed grant for
// another tenant has no business learning about the Secret either, and time
// and revocation come before it for the same reason: an expired, revoked
// or not yet valid grant authorizes nothing. So the Secret's state is told
// only to claims that would be granted but for it, which is the Datastore
// owner's own grant, and the Datastore's grant policy (steps 4, 6 and 7)
// only to grants its owner signed.
//
// The Datastore is validated here again rather than trusted from its
// status: the status may be older than the Secret or the Datastore in this
// request, and a claim must never be granted on a stale "Validated".
func Verify(claim *v1alpha1.ResourceClaim, ds *v1alpha1.Datastore, secret *corev1.Secret, now time.Time, opts Options) Decision {
	deny := func(reason, format string, args ...any) Decision {
		return Decision{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	version := grant.Version(claim)
	if version != v1alpha1.SignatureV1 && version != v1alpha1.SignatureV2 {
		return deny(v1alpha1.ReasonUnknownSignatureVersion, "spec.signatureVersion must be v1 or v2")
	}
	if claim.Namespace == "" {
		return deny(v1alpha1.ReasonInvalidGrant, "the claim has no namespace")
	}
	g := grant.Of(claim)
	times, err := g.Check(version)
	if err != nil {
		return deny(v1alpha1.ReasonInvalidGrant, "%v", err)
	}
	msg, err := g.Message(version)
	if err != nil {
		if errors.Is(err, grant.ErrUnknownVersion) {
			return deny(v1alpha1.ReasonUnknownSignatureVersion, "spec.signatureVersion must be v1 or v2")
		}
		return deny(v1alpha1.ReasonInvalidGrant, "%v", err)
	}
	dsRef := g.DatastoreNamespace + "/" + g.DatastoreName
	if ds == nil || ds.Namespace != g.DatastoreNamespace || ds.Name != g.DatastoreName {
		return deny(v1alpha1.ReasonDatastoreNotFound, "Datastore %s was not found", dsRef)
	}

	// Authenticity. Until the signature verifies, every message depends
	// only on the claim and on the Datastore's existence.
	if claim.Spec.Signature == "" {
		return deny(v1alpha1.ReasonMalformedSignature, "spec.signature is empty; sign the claim with the Datastore owner's key (formspec-hooks claim sign)")
	}
	sig, err := grant.ParseSignature(claim.Spec.Signature)
	if err != nil {
		return deny(v1alpha1.ReasonMalformedSignature, "spec.signature: %v", err)
	}
	if !verifies(ds, msg, sig) {
		// No key count and no word about malformed keys: both are the
		// Datastore's business until the claim proves it comes from its
		// owner.
		return deny(v1alpha1.ReasonInvalidSignature,
			"the %s signature does not verify against the owner keys of Datastore %s: the claim was changed after signing, was signed for another namespace or by another key; ask the Datastore owner to sign it again",
			version, dsRef)
	}
	if _, err := PublicKeys(ds); err != nil {
		// Signed by the owner, yet another of the listed keys is broken:
		// the Datastore does not validate, and its owner is the reader.
		if errors.Is(err, grant.ErrWeakPublicKey) {
			return deny(v1alpha1.ReasonWeakPublicKey, "Datastore %s: %v; the Datastore is refused until its owner removes that key", dsRef, err)
		}
		return deny(v1alpha1.ReasonMalformedPublicKey, "Datastore %s: %v", dsRef, err)
	}

	// A policy that does not parse refuses the Datastore at step 8; until
	// then its parts that do parse apply, so that no broken field of it
	// lets through what another field refuses.
	pol, _ := parsePolicy(ds.Spec.GrantPolicy)

	// The signature version. A v1 message binds no namespace and no
	// expiry: the same signed claim is valid in every namespace the
	// Datastore allows, and with expiresAt removed.
	if version == v1alpha1.SignatureV1 && !pol.acceptV1 && !opts.AcceptV1 {
		return deny(v1alpha1.ReasonSignatureVersionNotAccepted,
			"the claim is signed in the v1 format of the original FormSpec operator, which binds neither namespace nor expiry, and Datastore %s does not accept it; "+
				"ask its owner to sign the claim again as v2 (formspec-hooks claim sign), or, while moving from that operator, to set spec.grantPolicy.acceptV1Signatures: true on the Datastore "+
				"(or the install to run the hooks with --accept-v1-grants)", dsRef)
	}

	// Authorization.
	if !TenantAllowed(ds.Spec.AllowedTenants, claim.Namespace, g.Workspace) {
		return deny(v1alpha1.ReasonTenantNotAllowed, "%s/%s is not in spec.allowedTenants of Datastore %s; its owner must add %s/%s or %s/*",
			claim.Namespace, g.Workspace, dsRef, claim.Namespace, g.Workspace, claim.Namespace)
	}

	// Revocation, by date and by signature.
	if !pol.revokedBefore.IsZero() && times.GrantedAt.Before(pol.revokedBefore) {
		return deny(v1alpha1.ReasonGrantRevoked, "Datastore %s revokes every grant signed before %s (spec.grantPolicy.revokedBefore), and this one's spec.grantedAt is %s; ask the Datastore owner for a new grant",
			dsRef, pol.revokedBefore.UTC().Format(time.RFC3339), times.GrantedAt.UTC().Format(time.RFC3339))
	}
	if digest := grant.Digest(sig); pol.revoked[digest] {
		return deny(v1alpha1.ReasonGrantRevoked, "the grant whose signature digest is %s is revoked by Datastore %s (spec.grantPolicy.revokedSignatures); ask the Datastore owner for a new grant",
			digest, dsRef)
	}

	// Time.
	if earliest := times.GrantedAt.Add(-MaxClockSkew); now.Before(earliest) {
		d := deny(v1alpha1.ReasonGrantedInFuture, "spec.grantedAt is more than %s ahead of the cluster's clock; the claim becomes usable at %s",
			MaxClockSkew, earliest.UTC().Format(time.RFC3339))
		d.RecheckAt = earliest
		return d
	}
	end, capped := pol.end(times)
	if !end.IsZero() && !now.Before(end) {
		if capped {
			return deny(v1alpha1.ReasonExpired, "the grant expired at %s: Datastore %s accepts grants for at most %s after their spec.grantedAt (spec.grantPolicy.maxLifetime); ask the Datastore owner for a new one",
				end.UTC().Format(time.RFC3339), dsRef, pol.maxLifetimeText)
		}
		return deny(v1alpha1.ReasonExpired, "the grant expired at %s; ask the Datastore owner for a new one", end.UTC().Format(time.RFC3339))
	}

	// Only now, for a grant that holds in every other respect, is the
	// Datastore's endpoint Secret looked at and described.
	if d := CheckDatastore(ds, secret); !d.Allowed {
		switch d.Reason {
		case v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretNotLabeled, v1alpha1.ReasonWeakPublicKey, v1alpha1.ReasonOwnerKeyNotPinned:
			return deny(d.Reason, "Datastore %s: %s", dsRef, d.Message)
		case v1alpha1.ReasonInvalidPublicKey:
			return deny(v1alpha1.ReasonMalformedPublicKey, "Datastore %s: %s", dsRef, d.Message)
		default:
			return deny(v1alpha1.ReasonDatastoreNotValidated, "Datastore %s is not valid (%s): %s", dsRef, d.Reason, d.Message)
		}
	}
	msgText := fmt.Sprintf("%s signature of %s verified; %s access to Datastore %s granted to workspace %s",
		version, g.GrantedBy, g.Permission, dsRef, g.Workspace)
	if !end.IsZero() {
		msgText += " until " + end.UTC().Format(time.RFC3339)
	}
	return Decision{Allowed: true, Reason: v1alpha1.ReasonGranted, Message: msgText, RecheckAt: end,
		LegacySignature: version == v1alpha1.SignatureV1}
}

// verifies reports whether sig is a signature of msg by one of the
// Datastore's owner keys. Keys that do not parse, weak ones included, are
// skipped rather than reported, so that a claim without a valid signature
// cannot tell a Datastore with a broken key from one without, and a
// signature "by" a weak key verifies nothing.
//
// At most MaxOwnerPublicKeys keys besides ownerPublicKey are tried, however
// many the Datastore lists: each costs a verification, and a Datastore with
// more is refused anyway (PublicKeys).
func verifies(ds *v1alpha1.Datastore, msg, sig []byte) bool {
	keys := ds.Spec.OwnerPublicKeys[:min(len(ds.Spec.OwnerPublicKeys), v1alpha1.MaxOwnerPublicKeys)]
	for _, s := range append([]string{ds.Spec.OwnerPublicKey}, keys...) {
		k, err := grant.ParsePublicKey(s)
		if err == nil && grant.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}
