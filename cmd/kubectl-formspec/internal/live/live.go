// Package live reads what the kubectl plugin needs from a cluster: the
// custom resources, and the children of Workspaces found the way
// Metacontroller finds them.
package live

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// The resources of the formspec.dev custom resources.
var (
	Workspaces     = v1alpha1Resource("workspaces")
	ClusterClasses = v1alpha1Resource("clusterclasses")
	ResourceClaims = v1alpha1Resource("resourceclaims")
	Datastores     = v1alpha1Resource("datastores")
)

func v1alpha1Resource(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: plural}
}

// ChildResource is one child kind of the workspace CompositeController.
type ChildResource struct {
	Resource schema.GroupVersionResource
	Kind     string
}

// APIVersion is the child's apiVersion, "apps/v1" or "v1".
func (c ChildResource) APIVersion() string { return c.Resource.GroupVersion().String() }

// ChildResources are the childResources of
// compositecontrollers/workspace.yaml, in that order (TestChildResources
// keeps them in step).
var ChildResources = []ChildResource{
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment"},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service"},
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap"},
	{schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, "HorizontalPodAutoscaler"},
	{schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "PodDisruptionBudget"},
}

// ControllerUIDLabel is the label Metacontroller puts on every child of a
// CompositeController with generateSelector (as the workspace controller
// has), set to the parent's UID. Metacontroller's children of a parent are
// the objects that carry it with the parent's UID and whose controller
// owner reference is the parent: an owned child without the label is
// released, not synced.
const ControllerUIDLabel = "controller-uid"

// Children lists the Workspace children in namespace ("" for all
// namespaces), grouped by the UID of the Workspace they belong to. With a
// parent UID, only that Workspace's children are listed. Each object has
// its apiVersion and kind set.
func Children(ctx context.Context, dyn dynamic.Interface, namespace string, parent types.UID) (map[types.UID][]*unstructured.Unstructured, error) {
	selector := ControllerUIDLabel
	if parent != "" {
		selector = ControllerUIDLabel + "=" + string(parent)
	}
	out := map[types.UID][]*unstructured.Unstructured{}
	for _, cr := range ChildResources {
		list, err := dyn.Resource(cr.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, fmt.Errorf("cannot list %s: %w", cr.Resource.GroupResource(), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			ref := metav1.GetControllerOfNoCopy(obj)
			if ref == nil || !isWorkspace(ref) || string(ref.UID) != obj.GetLabels()[ControllerUIDLabel] {
				continue
			}
			obj.SetAPIVersion(cr.APIVersion())
			obj.SetKind(cr.Kind)
			out[ref.UID] = append(out[ref.UID], obj)
		}
	}
	return out, nil
}

// isWorkspace reports whether an owner reference names a Workspace, of
// whichever version of the API it was written with.
func isWorkspace(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == v1alpha1.Group && ref.Kind == "Workspace"
}

// Owner says whose obj is, for a person deciding what to do with an
// object at the name of a workspace's child that is not that child:
// "no controller owns it", or the controller's kind, name and apiVersion.
// The Workspace hooks cannot tell (Metacontroller shows them no such
// object); the plugin, with the user's credentials, can.
func Owner(obj *unstructured.Unstructured) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return "no controller owns it"
	case isWorkspace(ref) && obj.GetLabels()[ControllerUIDLabel] != string(ref.UID):
		return fmt.Sprintf("controlled by Workspace %s but without the %s label Metacontroller selects its children by, so Metacontroller releases it (the original operator's, not prepared: kubectl formspec takeover prepare)", ref.Name, ControllerUIDLabel)
	}
	return fmt.Sprintf("controlled by %s %s (%s)", ref.Kind, ref.Name, ref.APIVersion)
}
