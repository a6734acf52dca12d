package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// WorkspacesResource is what the reporter watches and writes onto.
var WorkspacesResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "workspaces"}

// FieldManager names the reporter's writes in managedFields.
const FieldManager = "formspec-reporter"

// DirectivePatch is the JSON merge patch that writes d: one annotation.
func DirectivePatch(d ccapi.Directive) ([]byte, error) {
	switch d.Action {
	case ccapi.ActionRestartRequired:
		return AnnotationPatch(v1alpha1.AnnotationArtifactBinaryHash, d.ArtifactHash), nil
	case ccapi.ActionIdle:
		return AnnotationPatch(v1alpha1.AnnotationIdle, "true"), nil
	case ccapi.ActionWake:
		return AnnotationPatch(v1alpha1.AnnotationIdle, nil), nil
	default:
		return nil, fmt.Errorf("unknown action %q", d.Action)
	}
}

// WakePatch removes formspec.dev/idle only if it is still "true": of
// several reporters seeing the same held request, one wakes the
// workspace, and the others learn from the failed test that it is done.
var WakePatch = []byte(`[{"op":"test","path":"/metadata/annotations/formspec.dev~1idle","value":"true"},` +
	`{"op":"remove","path":"/metadata/annotations/formspec.dev~1idle"}]`)

// AnnotationPatch is the merge patch that sets one annotation, or removes
// it for a nil value.
func AnnotationPatch(key string, value any) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	return b
}

// Patch patches the Workspace k, within timeout, as FieldManager. Every
// write of the reporter to the cluster goes through it: directives, wakes,
// idles and the wake cap, one annotation each.
func Patch(ctx context.Context, dyn dynamic.Interface, timeout time.Duration, k types.NamespacedName, pt types.PatchType, patch []byte) error {
	if dyn == nil {
		return fmt.Errorf("no kubernetes client")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := dyn.Resource(WorkspacesResource).Namespace(k.Namespace).
		Patch(ctx, k.Name, pt, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}
