// Package workspaceobj builds Workspaces as the API server serves them, for
// the tests of the reporter's watch and of what it writes.
package workspaceobj

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Workspace is a Workspace as the API server serves it: annotations,
// a status, and managedFields saying who wrote which annotation when.
func Workspace(ns, name string, annotations map[string]string, running, phase string, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.APIVersion)
	u.SetKind("Workspace")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetAnnotations(annotations)
	u.SetManagedFields(managed)
	_ = unstructured.SetNestedField(u.Object, "zero", "spec", "clusterClass")
	_ = unstructured.SetNestedField(u.Object, running, "status", "artifactHash")
	_ = unstructured.SetNestedField(u.Object, phase, "status", "phase")
	return u
}

// OwnsAnnotations is a managedFields entry of manager owning keys, written
// at.
func OwnsAnnotations(manager string, at time.Time, keys ...string) metav1.ManagedFieldsEntry {
	fields := `{"f:metadata":{"f:annotations":{".":{}`
	for _, k := range keys {
		fields += `,"f:` + k + `":{}`
	}
	fields += `}}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at},
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}
