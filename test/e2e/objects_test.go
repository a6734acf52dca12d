package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// workspaceFinalizer is the finalizer Metacontroller puts on a Workspace
// because the formspec-workspace controller has a finalize hook.
const workspaceFinalizer = "metacontroller.io/compositecontroller-formspec-workspace"

// namespace creates a namespace unless it exists.
func (e *env) namespace(t testing.TB, name string) {
	t.Helper()
	_, err := e.c.Create(controlplane.Object{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	})
	var apiErr *controlplane.APIError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict) {
		t.Fatalf("cannot create namespace %s: %v", name, err)
	}
}

// apply server-side applies a typed object as the test's field manager,
// leaving out status (a subresource) and the null creationTimestamp that
// encoding an unset ObjectMeta produces.
func (e *env) apply(t testing.TB, v any) {
	t.Helper()
	obj := toObject(t, v)
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if _, err := e.c.Apply(obj, fieldManager); err != nil {
		t.Fatalf("cannot apply %v %s: %v", obj["kind"], objName(obj), err)
	}
}

// patch merge-patches an object, failing the test on error.
func (e *env) patch(t testing.TB, apiVersion, kind, namespace, objName, subresource string, patch any) {
	t.Helper()
	if _, err := e.c.MergePatch(apiVersion, kind, namespace, objName, subresource, patch); err != nil {
		t.Fatalf("cannot patch %s %s/%s: %v", kind, namespace, objName, err)
	}
}

// workspace reads a Workspace; a missing one is an error.
func (e *env) workspace(namespace, name string) (*v1alpha1.Workspace, error) {
	return get[v1alpha1.Workspace](e.c, v1alpha1.APIVersion, "Workspace", namespace, name)
}

// deployment reads a Deployment; a missing one is (nil, nil).
func (e *env) deployment(namespace, name string) (*appsv1.Deployment, error) {
	return getAs[appsv1.Deployment](e.c, "apps/v1", "Deployment", namespace, name)
}

// exists reports whether the named object exists.
func (e *env) exists(apiVersion, kind, namespace, name string) (bool, error) {
	_, err := e.c.Get(apiVersion, kind, namespace, name)
	if controlplane.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// runDeployment plays the Deployment controller for one Deployment: when
// its status does not describe a finished rollout of its current spec, it
// writes one through the status subresource (every replica updated, ready
// and available). It returns an error while the Deployment does not exist.
func (e *env) runDeployment(namespace, name string) error {
	dep, err := e.deployment(namespace, name)
	if err != nil {
		return err
	}
	if dep == nil {
		return fmt.Errorf("Deployment %s/%s does not exist", namespace, name)
	}
	want := ptr.Deref(dep.Spec.Replicas, 1)
	s := dep.Status
	if s.ObservedGeneration == dep.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want {
		return nil
	}
	_, err = e.c.ApplyStatus(controlplane.Object{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"status": map[string]any{
			"observedGeneration": dep.Generation,
			"replicas":           want,
			"updatedReplicas":    want,
			"readyReplicas":      want,
			"availableReplicas":  want,
		},
	}, fieldManager)
	return err
}

// resync touches the Workspace and waits until Metacontroller has applied
// the sync that saw the touch. The touch sets the artifact-binary-hash
// annotation, which the hook copies into the Deployment's pod template, so
// the marker arriving there shows that sync's children were applied. Syncs
// of one Workspace never overlap, so every earlier sync is applied too.
func (e *env) resync(t testing.TB, namespace, name, marker string) *appsv1.Deployment {
	t.Helper()
	e.patch(t, v1alpha1.APIVersion, "Workspace", namespace, name, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationArtifactBinaryHash: marker}},
	})
	var dep *appsv1.Deployment
	e.eventually(t, fmt.Sprintf("artifact hash %q in the pod template of Deployment %s/%s", marker, namespace, name), func() error {
		var err error
		if dep, err = e.deployment(namespace, name); err != nil || dep == nil {
			return fmt.Errorf("Deployment: %v, %v", dep, err)
		}
		if got := dep.Spec.Template.Annotations[v1alpha1.AnnotationArtifactBinaryHash]; got != marker {
			return fmt.Errorf("pod template has %q", got)
		}
		return nil
	})
	return dep
}

// clusterClass returns a ClusterClass with a scaling policy and features.
func clusterClass(name string, s v1alpha1.Scaling, features ...string) *v1alpha1.ClusterClass {
	return &v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ClusterClassSpec{SLA: "99.9", Scaling: s, Features: features},
	}
}

// newWorkspace returns a Workspace of a class with a little configuration.
func newWorkspace(namespace, name, class string) *v1alpha1.Workspace {
	return &v1alpha1.Workspace{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.WorkspaceSpec{
			Owner:        "acme-corp",
			Region:       "ap-southeast-3",
			ClusterClass: class,
			Environment:  "production",
			Version:      "1.8.2",
			Config:       map[string]string{"LOG_LEVEL": "info"},
		},
	}
}

// render runs the sync hook in-process on a Workspace and its class, with
// nothing observed, and returns the Deployment it asks for: the reference
// for what Metacontroller should have applied.
func render(t testing.TB, ws *v1alpha1.Workspace, class *v1alpha1.ClusterClass) *appsv1.Deployment {
	t.Helper()
	// The request as Metacontroller sends it, decoded as the server does.
	body, err := json.Marshal(map[string]any{
		"parent":   ws,
		"children": map[string]any{},
		"related":  map[string]any{"ClusterClass.formspec.dev/v1alpha1": map[string]any{class.Name: class}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var req workspace.Request
	if err := req.Decode(body); err != nil {
		t.Fatal(err)
	}
	h := workspace.New(workspace.Config{ControlClusterURL: controlClusterURL})
	resp, err := h.Sync(context.Background(), &req)
	if err != nil {
		t.Fatalf("rendering Workspace %s/%s: %v", ws.Namespace, ws.Name, err)
	}
	for _, child := range resp.Children {
		dep, err := convert[appsv1.Deployment](child)
		if err != nil {
			t.Fatal(err)
		}
		if dep.Kind == "Deployment" {
			return dep
		}
	}
	t.Fatalf("rendering Workspace %s/%s gave no Deployment", ws.Namespace, ws.Name)
	return nil
}

// wantLabels are the labels the hook puts on every child of a workspace.
func wantLabels(ws, class string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "formspec-resource",
		"app.kubernetes.io/instance":   ws,
		"app.kubernetes.io/component":  "workspace",
		"app.kubernetes.io/part-of":    "formspec",
		"app.kubernetes.io/managed-by": "formspec-hooks",
		v1alpha1.LabelWorkspace:        ws,
		v1alpha1.LabelClusterClass:     class,
	}
}

// controller names an object's controlling owner as "Kind/name".
func controller(md metav1.ObjectMeta) string {
	for _, ref := range md.OwnerReferences {
		if ptr.Deref(ref.Controller, false) {
			return ref.Kind + "/" + ref.Name
		}
	}
	return ""
}

// cond is the part of a condition a test compares.
type cond struct {
	Type, Status, Reason string
}

func conds(cs []metav1.Condition) []cond {
	var out []cond
	for _, c := range cs {
		out = append(out, cond{Type: c.Type, Status: string(c.Status), Reason: c.Reason})
	}
	return out
}

func condition(cs []metav1.Condition, t string) cond {
	for _, c := range cs {
		if c.Type == t {
			return cond{Type: c.Type, Status: string(c.Status), Reason: c.Reason}
		}
	}
	return cond{Type: t}
}
