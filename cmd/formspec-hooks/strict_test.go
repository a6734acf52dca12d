package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/wake"
)

// typedKinds maps the kinds a hook may emit to their k8s.io/api types.
var typedKinds = map[string]func() any{
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"policy/v1/PodDisruptionBudget":          func() any { return &policyv1.PodDisruptionBudget{} },
	// The add-on's own type is in test/keda/binaries (TestRoutesDecodeStrictly).
	wake.RouteAPIVersion + "/" + wake.RouteKind: func() any { return &wake.Route{} },
}

func decodeStrict(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// TestFixtureResponsesDecodeStrictly checks every golden response the way
// its consumers read it: the envelope with only the fields of
// Metacontroller's response types, and every child or attachment into its
// k8s.io/api type with unknown fields rejected, so that a typo in a field
// name cannot hide in a golden file.
func TestFixtureResponsesDecodeStrictly(t *testing.T) {
	for _, fc := range fixtureCases(t) {
		raw, err := os.ReadFile(filepath.Join(fc.dir, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		var objects []metacontroller.Object
		var envelope any
		switch filepath.Base(filepath.Dir(fc.dir)) {
		case "customize":
			envelope = &metacontroller.CustomizeResponse{}
		default:
			var probe map[string]json.RawMessage
			if err := json.Unmarshal(raw, &probe); err != nil {
				t.Fatalf("%s: %v", fc.dir, err)
			}
			if _, ok := probe["attachments"]; ok {
				envelope = &metacontroller.DecoratorResponse{}
			} else {
				envelope = &metacontroller.CompositeResponse{}
			}
		}
		if err := decodeStrict(raw, envelope); err != nil {
			t.Errorf("%s: response envelope: %v", fc.dir, err)
			continue
		}
		switch r := envelope.(type) {
		case *metacontroller.CompositeResponse:
			for _, c := range r.Children {
				obj, ok := c.(map[string]any)
				if !ok {
					t.Fatalf("%s: a child is not an object: %v", fc.dir, c)
				}
				objects = append(objects, obj)
			}
		case *metacontroller.DecoratorResponse:
			objects = r.Attachments
		}
		for i, obj := range objects {
			key, _ := obj["apiVersion"].(string)
			key += "/" + obj["kind"].(string)
			newT, ok := typedKinds[key]
			if !ok {
				t.Errorf("%s: child %d has unexpected kind %s", fc.dir, i, key)
				continue
			}
			childRaw, _ := json.Marshal(obj)
			if err := decodeStrict(childRaw, newT()); err != nil {
				t.Errorf("%s: child %d (%s): %v", fc.dir, i, key, err)
			}
		}
	}
}
