package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceClaim permissions.
const (
	PermissionRead      = "read"
	PermissionReadWrite = "readwrite"
	PermissionAdmin     = "admin"
)

// Condition types of a ResourceClaim, besides ConditionReady and
// ConditionDenied. A workspace injects a claim's credentials only while
// Ready is True. CredentialsExposed is there, True, while the claim is
// granted and its credentials Secret is seen carrying a copy of its own
// data in an annotation; a claim whose Secret carries none has no such
// condition.
const ConditionCredentialsExposed = "CredentialsExposed"

// ConditionLegacySignature is there, True, while the claim is granted on a
// v1 signature, which binds neither namespace nor expiry: accepted only
// because its Datastore (spec.grantPolicy.acceptV1Signatures) or the
// install (formspec-hooks serve --accept-v1-grants) opts in. A claim
// granted on a v2 signature has no such condition.
const ConditionLegacySignature = "LegacySignature"

// Reasons a ResourceClaim is granted or denied. They are the reasons of the
// claim's Ready and Denied conditions and the labels of the decision
// counters, so they are API: add, never rename. A claim can also be denied
// for its Datastore's ReasonWeakPublicKey, ReasonSecretNotFound and
// ReasonSecretNotLabeled.
const (
	ReasonGranted                 = "Granted"
	ReasonUnknownSignatureVersion = "UnknownSignatureVersion"
	ReasonInvalidGrant            = "InvalidGrant"
	ReasonDatastoreNotFound       = "DatastoreNotFound"
	ReasonDatastoreNotValidated   = "DatastoreNotValidated"
	ReasonMalformedPublicKey      = "MalformedPublicKey"
	ReasonMalformedSignature      = "MalformedSignature"
	ReasonInvalidSignature        = "InvalidSignature"
	ReasonTenantNotAllowed        = "TenantNotAllowed"
	ReasonGrantedInFuture         = "GrantedInFuture"
	ReasonExpired                 = "Expired"
	// ReasonSignatureVersionNotAccepted: a v1 grant, which neither its
	// Datastore nor the install accepts.
	ReasonSignatureVersionNotAccepted = "SignatureVersionNotAccepted"
	// ReasonGrantRevoked: the Datastore's owner revoked the grant, by
	// its date (spec.grantPolicy.revokedBefore) or by its signature's
	// digest (spec.grantPolicy.revokedSignatures).
	ReasonGrantRevoked = "GrantRevoked"
)

// The reasons of the CredentialsExposed and LegacySignature conditions.
const (
	// ReasonLastAppliedAnnotation: the credentials Secret carries
	// Metacontroller's last-applied annotation, a copy of its data.
	ReasonLastAppliedAnnotation = "LastAppliedAnnotation"
	// ReasonSignatureV1: the claim is granted on a v1 signature.
	ReasonSignatureV1 = "SignatureV1"
)

// AnnotationCredentialsRevision on a credentials Secret counts the
// versions of its data: 1 for the first, one more each time the projected
// credentials change. The claim's status.credentialsHash is derived from it
// and from the claim's UID, never from the credentials.
const AnnotationCredentialsRevision = "formspec.dev/credentials-revision"

// LabelResourceClaim on a credentials Secret names the claim it belongs to.
const LabelResourceClaim = "formspec.dev/resourceclaim"

// Signature versions.
const (
	SignatureV1 = "v1"
	SignatureV2 = "v2"
)

// ResourceClaim is a signed grant giving a workspace credentials for a
// datastore. It lives in the workspace's namespace.
type ResourceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceClaimSpec   `json:"spec"`
	Status            ResourceClaimStatus `json:"status,omitzero"`
}

// ResourceClaimSpec is the grant as the datastore owner signed it.
type ResourceClaimSpec struct {
	// Datastore names the claimed Datastore.
	Datastore DatastoreClaimRef `json:"datastore"`
	// Workspace is the workspace, in the claim's namespace, granted access.
	Workspace string `json:"workspace"`
	// Permission is read, readwrite or admin.
	Permission string `json:"permission"`
	// GrantedBy names who signed the grant.
	GrantedBy string `json:"grantedBy"`
	// GrantedAt is when the grant was signed (RFC 3339, as written).
	GrantedAt string `json:"grantedAt"`
	// ExpiresAt, when set, ends the grant (RFC 3339, as written).
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Signature is the base64 ed25519 signature over the grant's message.
	Signature string `json:"signature,omitempty"`
	// SignatureVersion is v1 or v2 (default v1); it picks the signed message.
	SignatureVersion string `json:"signatureVersion,omitempty"`
}

// DatastoreClaimRef names the claimed Datastore; Namespace defaults to the
// claim's namespace.
type DatastoreClaimRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// ResourceClaimStatus is the verification result.
type ResourceClaimStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Binding is the Service Binding "provisioned service" reference to the
	// credentials Secret.
	Binding *Binding `json:"binding,omitempty"`
	// CredentialsHash identifies the version of the projected credentials:
	// it changes when they rotate and only then, and workspaces roll their
	// pods on it. It is derived from the claim's UID and the credentials
	// Secret's revision (AnnotationCredentialsRevision), never from the
	// credentials, so nobody who reads it can test a guessed password.
	CredentialsHash string `json:"credentialsHash,omitempty"`
}

// Binding names the Secret holding projected credentials.
type Binding struct {
	Name string `json:"name"`
}
