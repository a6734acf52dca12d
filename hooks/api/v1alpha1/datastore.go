package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelDatastore on an endpoint Secret names the Datastore allowed to
// project it. The label is the Secret owner's consent: without it nothing is
// ever copied out of the Secret.
const LabelDatastore = "formspec.dev/datastore"

// AnnotationOwnerPublicKeys on an endpoint Secret pins the owner keys its
// owner consents to: ed25519 public keys in hex, as a Datastore lists them,
// separated by commas or white space. When it is there, a Datastore listing
// any other key is refused (ReasonOwnerKeyNotPinned), so that whoever can
// edit the Datastore but not the Secret cannot add a key of their own and
// sign themselves a grant. Without it, the Datastore's keys are trusted as
// they are.
const AnnotationOwnerPublicKeys = "formspec.dev/owner-public-keys"

// MaxRevokedSignatures caps spec.grantPolicy.revokedSignatures: a longer
// list is for revokedBefore.
const MaxRevokedSignatures = 256

// Condition types of a Datastore.
const (
	ConditionValidated = "Validated"
	// ConditionDenied is also a ResourceClaim's condition.
	ConditionDenied = "Denied"
)

// Reasons a Datastore is or is not Validated: the reasons of its Validated
// and Denied conditions, so they are API: add, never rename.
// ReasonWeakPublicKey, ReasonSecretNotFound and ReasonSecretNotLabeled
// also deny a ResourceClaim of the Datastore.
const (
	ReasonValidated         = "Validated"
	ReasonUnsupportedDriver = "UnsupportedDriver"
	ReasonInvalidPublicKey  = "InvalidPublicKey"
	ReasonWeakPublicKey     = "WeakPublicKey"
	ReasonInvalidTenant     = "InvalidTenant"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonSecretNotLabeled  = "SecretNotLabeled"
	ReasonMissingKeys       = "MissingKeys"
	// ReasonOwnerKeyNotPinned: the endpoint Secret pins owner keys
	// (AnnotationOwnerPublicKeys) and the Datastore lists another.
	ReasonOwnerKeyNotPinned = "OwnerKeyNotPinned"
	// ReasonInvalidGrantPolicy: spec.grantPolicy has a value that does
	// not parse.
	ReasonInvalidGrantPolicy = "InvalidGrantPolicy"
)

// Datastore drivers.
const (
	DriverPostgres = "postgres"
	DriverMySQL    = "mysql"
	DriverRedis    = "redis"
	DriverMongoDB  = "mongodb"
)

// Datastore is a validated registry entry for a database whose credentials
// live in a Secret.
type Datastore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatastoreSpec   `json:"spec"`
	Status            DatastoreStatus `json:"status,omitzero"`
}

// DatastoreSpec is the desired state of a Datastore.
type DatastoreSpec struct {
	// Driver is postgres, mysql, redis or mongodb; it decides the required keys.
	Driver string `json:"driver"`
	// EndpointSecretRef names the Secret holding the connection details.
	EndpointSecretRef SecretRef `json:"endpointSecretRef"`
	// AllowedTenants are "namespace/workspace" or "namespace/*" entries;
	// at most MaxAllowedTenants.
	AllowedTenants []string `json:"allowedTenants,omitempty"`
	Owner          string   `json:"owner,omitempty"`
	// Capacity is free-form and only carried.
	Capacity json.RawMessage `json:"capacity,omitempty"`
	// OwnerPublicKey is the owner's ed25519 public key, 64 hex characters.
	OwnerPublicKey string `json:"ownerPublicKey,omitempty"`
	// OwnerPublicKeys are more accepted keys, for rotation; at most
	// MaxOwnerPublicKeys.
	OwnerPublicKeys []string `json:"ownerPublicKeys,omitempty"`
	// GrantPolicy is what the owner accepts of grants beyond a signature
	// by one of its keys; nil accepts v2 grants of any age.
	GrantPolicy *GrantPolicy `json:"grantPolicy,omitempty"`
}

// GrantPolicy is a Datastore owner's rules for the grants signed for it.
// Each is enforced on the claims' next sync: a claim that no longer
// qualifies is denied and its credentials Secret removed.
type GrantPolicy struct {
	// AcceptV1Signatures accepts grants signed in the original FormSpec
	// operator's v1 format, which binds no namespace and no expiry, for a
	// cluster moving from that operator. Off, v1 grants are denied
	// (ReasonSignatureVersionNotAccepted) unless the install accepts them.
	AcceptV1Signatures bool `json:"acceptV1Signatures,omitempty"`
	// MaxLifetime is the longest a grant lasts after its grantedAt, as a
	// Go duration ("2160h"): one without expiresAt, or with a later one,
	// ends then. Empty: no limit.
	MaxLifetime string `json:"maxLifetime,omitempty"`
	// RevokedBefore revokes every grant whose grantedAt is before it
	// (RFC 3339).
	RevokedBefore string `json:"revokedBefore,omitempty"`
	// RevokedSignatures revokes single grants by the digest of their
	// signature, "sha256:" and 64 hex digits (formspec-hooks claim
	// digest prints it); at most MaxRevokedSignatures.
	RevokedSignatures []string `json:"revokedSignatures,omitempty"`
}

// SecretRef names a Secret in the referring object's namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// DatastoreStatus is the observed state of a Datastore.
type DatastoreStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Endpoint is host:port, never credentials.
	Endpoint string `json:"endpoint,omitempty"`
}
