package metacontroller

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestWireShape pins the JSON of every response type to a literal. The
// literals name only fields Metacontroller's own v2 response types have;
// if a change here adds one, Metacontroller's strict decoding rejects
// every response of that hook.
func TestWireShape(t *testing.T) {
	cases := map[string]struct {
		reason string
		value  any
		want   string
	}{
		"CompositeSync": {
			reason: "A sync response carries status and children and nothing else by default.",
			value:  CompositeResponse{Status: map[string]any{"phase": "Ready"}, Children: []any{Object{"apiVersion": "v1", "kind": "ConfigMap"}}},
			want:   `{"status":{"phase":"Ready"},"children":[{"apiVersion":"v1","kind":"ConfigMap"}]}`,
		},
		"CompositeFinalize": {
			reason: "A finalize response may add resyncAfterSeconds and finalized.",
			value:  CompositeResponse{Status: nil, Children: []any{}, ResyncAfterSeconds: 5, Finalized: true},
			want:   `{"status":null,"children":[],"resyncAfterSeconds":5,"finalized":true}`,
		},
		"Decorator": {
			reason: "A decorator response uses attachments, and labels/annotations/status only when set.",
			value:  DecoratorResponse{Labels: map[string]*string{"a": ptr.To("b"), "gone": nil}, Status: map[string]any{"x": 1}, Attachments: []Object{}},
			want:   `{"labels":{"a":"b","gone":null},"status":{"x":1},"attachments":[]}`,
		},
		"DecoratorEmpty": {
			reason: "An observe-only decorator answers with an empty attachment list.",
			value:  DecoratorResponse{Attachments: []Object{}},
			want:   `{"attachments":[]}`,
		},
		"Customize": {
			reason: "Related rules use Metacontroller's RelatedResourceRule field names.",
			value: CustomizeResponse{RelatedResources: []RelatedResourceRule{
				{APIVersion: "formspec.dev/v1alpha1", Resource: "clusterclasses", Names: []string{"gold"}},
				{APIVersion: "v1", Resource: "secrets", Namespace: "ns", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k": "v"}}},
			}},
			want: `{"relatedResources":[{"apiVersion":"formspec.dev/v1alpha1","resource":"clusterclasses","names":["gold"]},{"apiVersion":"v1","resource":"secrets","labelSelector":{"matchLabels":{"k":"v"}},"namespace":"ns"}]}`,
		},
		"CustomizeNothing": {
			reason: "No related resources is an empty object.",
			value:  CustomizeResponse{},
			want:   `{}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\njson.Marshal(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRequestDecoding(t *testing.T) {
	body := `{
	  "controller": {"kind": "CompositeController"},
	  "parent": {"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "metadata": {"name": "acme", "namespace": "ns"}},
	  "children": {"Deployment.apps/v1": {"ns/acme": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "acme", "namespace": "ns"}, "spec": {"replicas": 3}}}},
	  "related": {"ClusterClass.formspec.dev/v1alpha1": {"gold": {"apiVersion": "formspec.dev/v1alpha1", "kind": "ClusterClass", "metadata": {"name": "gold"}}}},
	  "finalizing": false
	}`
	var req CompositeRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("Validate(): %v", err)
	}
	dep, err := Get[appsv1.Deployment](req.Children, Key("apps/v1", "Deployment"), Name("ns", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if dep == nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Get Deployment: got %+v, want replicas 3", dep)
	}
	missing, err := Get[corev1.Service](req.Children, Key("v1", "Service"), Name("ns", "acme"))
	if err != nil || missing != nil {
		t.Errorf("Get missing Service: got %v, %v; want nil, nil", missing, err)
	}
	if got := req.Related.Count(); got != 1 {
		t.Errorf("Related.Count(): got %d, want 1", got)
	}
	for name, bad := range map[string]CompositeRequest{"NoParent": {}, "NullParent": {Parent: json.RawMessage("null")}} {
		if diff := cmp.Diff(error(MissingObjectError{Field: "parent"}), bad.Validate(), cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s: Validate() (-want, +got):\n%s", name, diff)
		}
	}
}

func TestToObject(t *testing.T) {
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "ns"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)},
	}
	got, err := ToObject(dep)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"acme","namespace":"ns"},"spec":{"replicas":0,"selector":null,"strategy":{},"template":{"spec":{"containers":null}}}}`
	if diff := cmp.Diff(want, string(raw)); diff != "" {
		t.Errorf("ToObject: creationTimestamp, empty status and empty metadata must go; -want, +got:\n%s", diff)
	}
	if _, err := ToObject(&corev1.ConfigMap{}); err == nil {
		t.Error("ToObject without TypeMeta: got nil error, want one")
	}
}

// TestDecodeSkipsOnlyTheController checks that the Decode methods bring
// every field but Controller through, and trips when a request type gains
// a field, which its Decode (and this test) must then name too.
func TestDecodeSkipsOnlyTheController(t *testing.T) {
	for typ, fields := range map[reflect.Type]int{reflect.TypeFor[DecoratorRequest](): 5, reflect.TypeFor[CustomizeRequest](): 2} {
		if typ.NumField() != fields {
			t.Errorf("%s has %d fields, where its Decode knows %d", typ, typ.NumField(), fields)
		}
	}
	object := json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	objects := ObjectMap{"Secret.v1": {"ns/s": json.RawMessage(`{"metadata":{"name":"s"}}`)}}
	controller := json.RawMessage(`{"kind":"DecoratorController"}`)
	for name, tc := range map[string]struct {
		full    any
		decoded interface{ Decode([]byte) error }
		want    any
	}{
		"Decorator": {
			full:    DecoratorRequest{Controller: controller, Object: object, Attachments: objects, Related: objects, Finalizing: true},
			decoded: new(DecoratorRequest),
			want:    &DecoratorRequest{Object: object, Attachments: objects, Related: objects, Finalizing: true},
		},
		"Customize": {
			full:    CustomizeRequest{Controller: controller, Parent: object},
			decoded: new(CustomizeRequest),
			want:    &CustomizeRequest{Parent: object},
		},
	} {
		t.Run(name, func(t *testing.T) {
			body, err := json.Marshal(tc.full)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.decoded.Decode(body); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.decoded); diff != "" {
				t.Errorf("Decode: -want, +got:\n%s", diff)
			}
		})
	}
}
