package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelDatastore on an endpoint Secret names the Datastore allowed to
// project it. The label is the Secret owner's consent: without it nothing is
// ever copied out of the Secret.
const LabelDatastore = "formspec.dev/datastore"

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
