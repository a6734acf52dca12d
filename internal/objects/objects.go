// Package objects decodes the project's objects as a hook request carries
// them (a ResourceClaim, a Datastore, a Secret) into their Go types, with
// all of their spec, data and status but only the metadata a hook reads.
//
// Metacontroller sends every object whole, managedFields included, and
// decoding those into metav1.ObjectMeta costs more than the rest of a
// claim: each entry's time goes through metav1.Time's UnmarshalJSON,
// which runs encoding/json on every call, and each fieldsV1 tree is
// copied. Here the metadata and the conditions' times are decoded as
// time.Time, which the codec parses itself, and managedFields, owner
// references and finalizers are skipped, not decoded.
package objects

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
)

// Meta is the part of an object's metadata that hooks read.
type Meta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               types.UID         `json:"uid"`
	ResourceVersion   string            `json:"resourceVersion"`
	Generation        int64             `json:"generation"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
}

// ObjectMeta is m as the metav1.ObjectMeta the project's types embed.
func (m *Meta) ObjectMeta() metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: metav1.Time{Time: m.CreationTimestamp},
		Labels:            m.Labels, Annotations: m.Annotations,
	}
	if m.DeletionTimestamp != nil {
		out.DeletionTimestamp = &metav1.Time{Time: *m.DeletionTimestamp}
	}
	return out
}

// Condition is a metav1.Condition, field for field, its time a time.Time
// (TestCondition keeps the two in step).
type Condition struct {
	Type               string                 `json:"type"`
	Status             metav1.ConditionStatus `json:"status"`
	ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time              `json:"lastTransitionTime"`
	Reason             string                 `json:"reason"`
	Message            string                 `json:"message"`
}

// Conditions are cs as metav1.Conditions; nil for none.
func Conditions(cs []Condition) []metav1.Condition {
	if len(cs) == 0 {
		return nil
	}
	out := make([]metav1.Condition, len(cs))
	for i, c := range cs {
		out[i] = metav1.Condition{Type: c.Type, Status: c.Status, ObservedGeneration: c.ObservedGeneration,
			LastTransitionTime: metav1.Time{Time: c.LastTransitionTime}, Reason: c.Reason, Message: c.Message}
	}
	return out
}

// ResourceClaim decodes a ResourceClaim.
func ResourceClaim(raw []byte) (*v1alpha1.ResourceClaim, error) {
	var o struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        Meta                       `json:"metadata"`
		Spec            v1alpha1.ResourceClaimSpec `json:"spec"`
		// The outer Conditions takes the JSON name from the embedded
		// status's, which stays empty.
		Status struct {
			v1alpha1.ResourceClaimStatus
			Conditions []Condition `json:"conditions,omitempty"`
		} `json:"status"`
	}
	if err := codec.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	c := &v1alpha1.ResourceClaim{TypeMeta: o.TypeMeta, ObjectMeta: o.Metadata.ObjectMeta(), Spec: o.Spec, Status: o.Status.ResourceClaimStatus}
	c.Status.Conditions = Conditions(o.Status.Conditions)
	return c, nil
}

// Datastore decodes a Datastore.
func Datastore(raw []byte) (*v1alpha1.Datastore, error) {
	var o struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        Meta                   `json:"metadata"`
		Spec            v1alpha1.DatastoreSpec `json:"spec"`
		Status          struct {
			v1alpha1.DatastoreStatus
			Conditions []Condition `json:"conditions,omitempty"`
		} `json:"status"`
	}
	if err := codec.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	d := &v1alpha1.Datastore{TypeMeta: o.TypeMeta, ObjectMeta: o.Metadata.ObjectMeta(), Spec: o.Spec, Status: o.Status.DatastoreStatus}
	d.Status.Conditions = Conditions(o.Status.Conditions)
	return d, nil
}

// Secret decodes a Secret.
func Secret(raw []byte) (*corev1.Secret, error) {
	var s struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        Meta              `json:"metadata"`
		Immutable       *bool             `json:"immutable"`
		Data            map[string][]byte `json:"data"`
		StringData      map[string]string `json:"stringData"`
		Type            corev1.SecretType `json:"type"`
	}
	if err := codec.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return &corev1.Secret{TypeMeta: s.TypeMeta, ObjectMeta: s.Metadata.ObjectMeta(), Immutable: s.Immutable, Data: s.Data, StringData: s.StringData, Type: s.Type}, nil
}

// Metadata decodes only the metadata of an object.
func Metadata(raw []byte) (*metav1.PartialObjectMetadata, error) {
	var o struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        Meta `json:"metadata"`
	}
	if err := codec.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: o.Metadata.ObjectMeta()}, nil
}
