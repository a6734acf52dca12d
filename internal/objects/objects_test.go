package objects_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/objects"
)

// TestCondition checks that Condition still has metav1.Condition's fields,
// so that a field Kubernetes adds is not silently dropped.
func TestCondition(t *testing.T) {
	sameFields(t, reflect.TypeFor[metav1.Condition](), reflect.TypeFor[objects.Condition](), true)
}

// TestMeta checks that every field of Meta is a field of metav1.ObjectMeta,
// by name and JSON name, so that ObjectMeta fills what it says it does.
func TestMeta(t *testing.T) {
	sameFields(t, reflect.TypeFor[metav1.ObjectMeta](), reflect.TypeFor[objects.Meta](), false)
}

// sameFields checks that each field of view is the field of full by the
// same name with the same JSON tag, of the same type but for time.Time in
// place of metav1.Time; with all, that view has every field of full.
func sameFields(t *testing.T, full, view reflect.Type, all bool) {
	t.Helper()
	if all && full.NumField() != view.NumField() {
		t.Fatalf("%s has %d fields, %s %d", full, full.NumField(), view, view.NumField())
	}
	for i := range view.NumField() {
		v := view.Field(i)
		f, ok := full.FieldByName(v.Name)
		if !ok {
			t.Errorf("%s has no field %s", full, v.Name)
			continue
		}
		if jsonName(f) != jsonName(v) {
			t.Errorf("%s.%s is %q in JSON, %s's %q", full, f.Name, jsonName(f), view, jsonName(v))
		}
		if f.Type != v.Type && strings.TrimPrefix(f.Type.String(), "*") != "v1.Time" {
			t.Errorf("%s.%s is a %s, %s's a %s", full, f.Name, f.Type, view, v.Type)
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// everything is metadata with every field a hook does not read set too,
// and times that metav1.Time and time.Time must read alike.
const everything = `"metadata":{"name":"orders","namespace":"team-a","uid":"9d8c7b6a","resourceVersion":"5200","generation":3,
	"creationTimestamp":"2025-12-31T23:00:00Z","deletionTimestamp":"2026-01-02T03:04:05Z","deletionGracePeriodSeconds":0,
	"labels":{"app":"shop"},"annotations":{"note":"kept"},"finalizers":["formspec.dev/teardown"],
	"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"1"}],
	"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"formspec.dev/v1alpha1","time":"2026-01-01T00:00:00Z",
	  "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:workspace":{}}}}]}`

// TestDecodeAsFull decodes every ResourceClaim, Datastore and Secret of the
// claim fixtures, and objects with every metadata field set, both with
// this package and straight into their types: the two must agree but for
// the metadata hooks do not read.
func TestDecodeAsFull(t *testing.T) {
	kinds := map[string]func(t *testing.T, raw []byte){
		"ResourceClaim": func(t *testing.T, raw []byte) {
			check(t, raw, objects.ResourceClaim, func(c *v1alpha1.ResourceClaim) *metav1.ObjectMeta { return &c.ObjectMeta })
		},
		"Datastore": func(t *testing.T, raw []byte) {
			check(t, raw, objects.Datastore, func(d *v1alpha1.Datastore) *metav1.ObjectMeta { return &d.ObjectMeta })
		},
		"Secret": func(t *testing.T, raw []byte) {
			check(t, raw, objects.Secret, func(s *corev1.Secret) *metav1.ObjectMeta { return &s.ObjectMeta })
			check(t, raw, objects.Metadata, func(m *metav1.PartialObjectMetadata) *metav1.ObjectMeta { return &m.ObjectMeta })
		},
	}
	seen := map[string]int{}
	requests, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "resourceclaim", "sync", "*", "request.json"))
	if err != nil || len(requests) == 0 {
		t.Fatalf("no claim fixtures: %v", err)
	}
	for _, path := range requests {
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Object  json.RawMessage                       `json:"object"`
			Related map[string]map[string]json.RawMessage `json:"related"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		raws := []json.RawMessage{req.Object}
		for _, group := range req.Related {
			for _, raw := range group {
				raws = append(raws, raw)
			}
		}
		for _, raw := range raws {
			var o struct{ Kind string }
			if err := json.Unmarshal(raw, &o); err != nil || kinds[o.Kind] == nil {
				t.Fatalf("%s: an object of kind %q", path, o.Kind)
			}
			t.Run(filepath.Base(filepath.Dir(path))+"/"+o.Kind, func(t *testing.T) { kinds[o.Kind](t, raw) })
			seen[o.Kind]++
		}
	}
	for kind, body := range map[string]string{
		"ResourceClaim": `"spec":{"datastore":{"name":"orders-db","namespace":"data"},"workspace":"shop","permission":"read","grantedAt":"2025-12-31T23:00:00Z"},
			"status":{"observedGeneration":2,"binding":{"name":"orders-credentials"},"credentialsHash":"sha256:00",
			"conditions":[{"type":"Ready","status":"True","observedGeneration":2,"lastTransitionTime":"2026-01-01T10:00:00+02:00","reason":"Granted","message":"ok"}]}`,
		"Datastore": `"spec":{"driver":"postgres","endpointSecretRef":{"name":"ep"},"capacity":{"storage":"1Gi"}},
			"status":{"observedGeneration":1,"endpoint":"db:5432","conditions":[{"type":"Validated","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"Valid","message":""}]}`,
		"Secret": `"type":"Opaque","immutable":true,"data":{"password":"czNjcjN0"},"stringData":{"user":"app"}`,
	} {
		raw := []byte(`{"kind":"` + kind + `",` + everything + `,` + body + `}`)
		t.Run("every-field/"+kind, func(t *testing.T) { kinds[kind](t, raw) })
		seen[kind]++
	}
	for kind := range kinds {
		if seen[kind] < 2 {
			t.Errorf("%d %s objects checked, want the fixtures' and one with every field", seen[kind], kind)
		}
	}
}

// check decodes raw with decode and straight into T, and compares the two
// as JSON, with the metadata decode does not read cleared from the
// straight one.
func check[T any](t *testing.T, raw []byte, decode func([]byte) (*T, error), meta func(*T) *metav1.ObjectMeta) {
	t.Helper()
	got, err := decode(raw)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := new(T)
	if err := json.Unmarshal(raw, want); err != nil {
		t.Fatalf("straight: %v", err)
	}
	m := meta(want)
	m.ManagedFields, m.OwnerReferences, m.Finalizers, m.DeletionGracePeriodSeconds = nil, nil, nil, nil
	if diff := cmp.Diff(string(jsonOf(t, want)), string(jsonOf(t, got))); diff != "" {
		t.Errorf("-straight, +objects:\n%s", diff)
	}
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeError checks that an object that does not fit its type is an
// error, not a partly filled object.
func TestDecodeError(t *testing.T) {
	for name, decode := range map[string]func([]byte) error{
		"ResourceClaim": func(raw []byte) error { _, err := objects.ResourceClaim(raw); return err },
		"Datastore":     func(raw []byte) error { _, err := objects.Datastore(raw); return err },
		"Secret":        func(raw []byte) error { _, err := objects.Secret(raw); return err },
		"Metadata":      func(raw []byte) error { _, err := objects.Metadata(raw); return err },
	} {
		for _, raw := range []string{`[]`, `{"metadata":{"generation":"three"}}`, `{"metadata":{"creationTimestamp":"yesterday"}}`} {
			if decode([]byte(raw)) == nil {
				t.Errorf("%s of %s: no error", name, raw)
			}
		}
	}
}
