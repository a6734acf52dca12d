package workspace

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
)

// TestRequestKeys keeps the JSON tags of Children and Related, which decide
// where each kind is decoded from, equal to the keys Metacontroller uses.
func TestRequestKeys(t *testing.T) {
	var got []string
	for _, typ := range []reflect.Type{reflect.TypeFor[Children](), reflect.TypeFor[Related]()} {
		for f := range typ.Fields() {
			got = append(got, f.Tag.Get("json"))
		}
	}
	want := []string{keyDeployment, keyService, keyConfigMap, keyHPA, keyPDB, keyClusterClass, keyResourceClaim}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request keys: -want, +got:\n%s", diff)
	}
	// The children decoded whole for freezing come from the same keys.
	children, whole := reflect.TypeFor[Children](), reflect.TypeFor[wholeChildren]()
	for f := range children.Fields() {
		w, ok := whole.FieldByName(f.Name)
		if !ok || w.Tag != f.Tag {
			t.Errorf("wholeChildren.%s: tag %q, want %q as in Children", f.Name, w.Tag, f.Tag)
		}
	}
}

func TestObjectCount(t *testing.T) {
	body := `{"parent":{"metadata":{"name":"a"}},
	  "children":{"Deployment.apps/v1":{"n/a":{},"n/b":null},"Service.v1":{"n/a":{}},"ConfigMap.v1":{"n/a-config":{}}},
	  "related":{"ClusterClass.formspec.dev/v1alpha1":{"c":{}},"ResourceClaim.formspec.dev/v1alpha1":{"n/x":{},"n/y":{},"n/z":null}}}`
	var req Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(6, req.ObjectCount()); diff != "" {
		t.Errorf("ObjectCount (null entries are not objects): -want, +got:\n%s", diff)
	}
}

// TestDeploymentView checks that the view of an observed Deployment keeps
// every field the hooks read (status.go, replicas.go, decide.go) and that
// a field it reads of the wrong type is refused as a broken request.
func TestDeploymentView(t *testing.T) {
	const body = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","namespace":"n","generation":3,"uid":"u"},
	  "spec":{"replicas":2,"template":{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"h"}},"spec":{"containers":[{"name":"c"}]}}},
	  "status":{"observedGeneration":3,"replicas":3,"updatedReplicas":2,"readyReplicas":1,"availableReplicas":1,"terminatingReplicas":1,
	    "conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"m","lastUpdateTime":"2026-01-10T09:00:00Z"}]}}`
	var req Request
	if err := req.Decode([]byte(`{"children":{"Deployment.apps/v1":{"n/a":` + body + `}}}`)); err != nil {
		t.Fatal(err)
	}
	got := req.Children.Deployments["n/a"].deployment()
	want := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Generation: 3},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{"formspec.dev/artifact-binary-hash": "h"}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, TerminatingReplicas: ptr.To[int32](1),
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "m"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deployment view: -want, +got:\n%s", diff)
	}
	for _, child := range []string{`{"spec":{"replicas":"two"}}`, `[]`, `"a"`} {
		if err := new(Request).Decode([]byte(`{"children":{"Deployment.apps/v1":{"n/a":` + child + `}}}`)); err == nil {
			t.Errorf("observed Deployment %s: got no error, want the request refused", child)
		}
	}
}

// TestStatusView checks that the parent's status decodes through
// statusView into what decoding it straight into a WorkspaceStatus gives.
func TestStatusView(t *testing.T) {
	raw := []byte(`{"observedGeneration":3,"phase":"Ready","conditions":[
	  {"type":"Ready","status":"True","observedGeneration":3,"lastTransitionTime":"2026-01-10T09:00:00Z","reason":"Available","message":"1 of 1 replicas available"},
	  {"type":"Degraded","status":"False","lastTransitionTime":"2026-01-10T09:01:02Z","reason":"AsExpected","message":""}],
	  "replicas":1,"readyReplicas":1,"updatedReplicas":1,"serviceName":"acme","artifactHash":"abc",
	  "datastores":[{"name":"orders","claim":"acme-orders","state":"Injected","secretName":"acme-orders-credentials"}]}`)
	var want v1alpha1.WorkspaceStatus
	var got statusView
	if err := codec.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.status()); diff != "" {
		t.Errorf("status through statusView: -straight, +view:\n%s", diff)
	}
}
