package wake_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/wake"
	"github.com/formspec/formspec-hooks/internal/testkit/golden"
)

const controllerFile = "../../../compositecontrollers/wake-on-request/wake.yaml"

// routeGroup is the attachments group Metacontroller always sends, empty
// or not, for the controller's one attachment rule.
var routeGroup = metacontroller.Key(wake.RouteAPIVersion, wake.RouteKind)

// testWorkspace is a Workspace as Metacontroller shows it to the
// decorator, already synced by the workspace controller.
func testWorkspace(annotations map[string]string) *v1alpha1.Workspace {
	created := metav1.NewTime(time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC))
	return &v1alpha1.Workspace{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "acme", Namespace: "tenant-acme", UID: types.UID("7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910"),
			Generation: 2, ResourceVersion: "48213", CreationTimestamp: created, Annotations: annotations,
			Finalizers: []string{"metacontroller.io/compositecontroller-formspec-workspace"},
		},
		Spec: v1alpha1.WorkspaceSpec{Owner: "acme-corp", Region: "ap-southeast-3", ClusterClass: "on-demand", Environment: "production", Version: "1.8.2"},
		Status: v1alpha1.WorkspaceStatus{
			ObservedGeneration: 2, Phase: v1alpha1.PhaseIdle, ServiceName: "acme",
		},
	}
}

// testClass is a class whose workspaces wake on request, or one of its
// variants.
func testClass(change func(*v1alpha1.ClusterClass)) *v1alpha1.ClusterClass {
	c := &v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "on-demand", UID: types.UID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), ResourceVersion: "311", CreationTimestamp: metav1.NewTime(time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC))},
		Spec: v1alpha1.ClusterClassSpec{
			SLA:      "standard",
			Scaling:  v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), ScaleToZero: true, IdleAfterSeconds: 900, WakeTimeoutSeconds: ptr.To[int32](30), MaxHeldRequests: ptr.To[int32](50)},
			Features: []string{v1alpha1.FeatureWakeOnRequest},
		},
	}
	if change != nil {
		change(c)
	}
	return c
}

// observedRoute is the route attached by an earlier sync, as the API
// server returns it.
func observedRoute() map[string]any {
	return map[string]any{
		"apiVersion": wake.RouteAPIVersion, "kind": wake.RouteKind,
		"metadata": map[string]any{
			"name": "acme", "namespace": "tenant-acme", "uid": "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716",
			"resourceVersion": "48190", "generation": 1, "creationTimestamp": "2026-01-10T09:00:02Z",
			"labels": map[string]any{"app.kubernetes.io/managed-by": "formspec-hooks", "formspec.dev/workspace": "acme"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": v1alpha1.APIVersion, "kind": "Workspace", "name": "acme",
				"uid": "7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910", "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"target":        map[string]any{"service": "acme", "portName": "http"},
			"timeouts":      map[string]any{"readiness": "30s"},
			"rules":         []any{map[string]any{"hosts": wake.Hosts("acme", "tenant-acme")}},
			"scalingMetric": map[string]any{"concurrency": map[string]any{"targetValue": 100}},
		},
	}
}

func syncRequest(t *testing.T, ws *v1alpha1.Workspace, class *v1alpha1.ClusterClass, attached ...map[string]any) *metacontroller.DecoratorRequest {
	var related []golden.Object
	if class != nil {
		related = append(related, golden.Object{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass", Name: class.Name, Value: class})
	}
	var attachments []golden.Object
	for _, a := range attached {
		meta := a["metadata"].(map[string]any)
		attachments = append(attachments, golden.Object{APIVersion: wake.RouteAPIVersion, Kind: wake.RouteKind,
			Namespace: meta["namespace"].(string), Name: meta["name"].(string), Value: a})
	}
	return &metacontroller.DecoratorRequest{
		Controller:  golden.Controller(t, controllerFile),
		Object:      golden.Raw(t, ws),
		Attachments: golden.Objects(t, []string{routeGroup}, attachments...),
		Related:     golden.Objects(t, nil, related...),
	}
}

// syncRequests are the cases of fixtures/wake/sync.
func syncRequests(t *testing.T) map[string]any {
	plain := testClass(func(c *v1alpha1.ClusterClass) { c.Spec.Features = nil; c.Spec.Scaling.IdleAfterSeconds = 0 })
	defaults := testClass(func(c *v1alpha1.ClusterClass) {
		c.Spec.Scaling.WakeTimeoutSeconds, c.Spec.Scaling.MaxHeldRequests = nil, nil
	})
	return map[string]any{
		"route-attached":            syncRequest(t, testWorkspace(map[string]string{v1alpha1.AnnotationIdle: "true"}), testClass(nil)),
		"route-unchanged":           syncRequest(t, testWorkspace(map[string]string{v1alpha1.AnnotationIdle: "true"}), testClass(nil), observedRoute()),
		"route-defaults":            syncRequest(t, testWorkspace(nil), defaults),
		"overflow-refuses-with-503": syncRequest(t, testWorkspace(map[string]string{v1alpha1.AnnotationWakeOverflow: "true"}), testClass(nil), observedRoute()),
		"feature-off-removes-route": syncRequest(t, testWorkspace(nil), plain, observedRoute()),
		"class-missing-keeps-route": syncRequest(t, testWorkspace(nil), nil, observedRoute()),
	}
}

// customizeRequests are the cases of fixtures/wake/customize.
func customizeRequests(t *testing.T) map[string]any {
	return map[string]any{
		"class-by-name": &metacontroller.CustomizeRequest{Controller: golden.Controller(t, controllerFile), Parent: golden.Raw(t, testWorkspace(nil))},
	}
}

// TestFixtureRequests keeps the wake fixture requests, built here, in step
// with fixtures/wake/; cmd/formspec-hooks TestFixtures posts them to the
// real server and checks the responses.
func TestFixtureRequests(t *testing.T) {
	golden.Requests(t, "../../../fixtures/wake/sync", syncRequests(t))
	golden.Requests(t, "../../../fixtures/wake/customize", customizeRequests(t))
}
