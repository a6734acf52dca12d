package claimsync

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
)

// claimsResource is what the writer watches beside the reporter's watch
// of Workspaces (kube.WorkspacesResource, which it patches).
var claimsResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "resourceclaims"}

// The informers' caches hold these, not the objects: a fleet's claims and
// Workspaces cost the writer only what a summary is computed from. The
// Workspaces' cache is kube.Workspace, shared with the directive budget.

// want is the annotation workspace w should carry given claims, and false
// when it should carry none: a workspace without datastores needs no
// summary.
func want(w *kube.Workspace, claims []*v1alpha1.ResourceClaim) (string, bool) {
	if len(w.Datastores) == 0 {
		return "", false
	}
	ws := &v1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name},
		Spec:       v1alpha1.WorkspaceSpec{Datastores: w.Datastores},
	}
	return claimsummary.Encode(claimsummary.For(ws, claims)), true
}

// summaryInputs reports whether a Workspace's update changed what its
// summary depends on or what it carries: its datastores or its summary,
// or the Workspace itself (deleted and created again under its name, seen
// as an update when the watch lists anew). Status writes, the most
// frequent updates, change none of them.
func summaryInputs(old, cur *kube.Workspace) bool {
	return old.UID != cur.UID || old.HasClaims != cur.HasClaims || old.Claims != cur.Claims ||
		!slices.Equal(old.Datastores, cur.Datastores)
}

// claim is what the writer keeps of a ResourceClaim: the fields
// claimsummary.For reads, and nothing else (no grant, no messages).
type claim struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	rc *v1alpha1.ResourceClaim
}

// DeepCopyObject makes claim a runtime.Object for the cache. Nothing
// modifies a cached claim, so rc is shared.
func (c *claim) DeepCopyObject() runtime.Object {
	cp := *c
	cp.ObjectMeta = *c.ObjectMeta.DeepCopy()
	return &cp
}

// workspaceKey is the Workspace the claim names, in its own namespace.
func (c *claim) workspaceKey() types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.rc.Spec.Workspace}
}

// claimOf keeps of a ResourceClaim what its workspace's summary reads:
// the workspace and datastore it names, whether it is going away, the
// Ready and Denied conditions (status only), the binding and the
// credentials hash. A status that does not decode keeps none of it: the
// claim then reads as pending, never as granted.
func claimOf(u *unstructured.Unstructured) *claim {
	rc := &v1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), DeletionTimestamp: u.GetDeletionTimestamp(),
	}}
	rc.Spec.Workspace, _, _ = unstructured.NestedString(u.Object, "spec", "workspace")
	rc.Spec.Datastore.Name, _, _ = unstructured.NestedString(u.Object, "spec", "datastore", "name")
	rc.Spec.Datastore.Namespace, _, _ = unstructured.NestedString(u.Object, "spec", "datastore", "namespace")
	if m, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		var st v1alpha1.ResourceClaimStatus
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st) == nil {
			for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionDenied} {
				if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
					rc.Status.Conditions = append(rc.Status.Conditions, metav1.Condition{Type: c.Type, Status: c.Status})
				}
			}
			rc.Status.Binding, rc.Status.CredentialsHash = st.Binding, st.CredentialsHash
		}
	}
	return &claim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
		rc:         rc,
	}
}
