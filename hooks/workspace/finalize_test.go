package workspace

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

func TestLastApplied(t *testing.T) {
	cases := map[string]struct {
		reason   string
		observed string
		want     metacontroller.Object
	}{
		"FromAnnotation": {
			reason:   "What Metacontroller last applied is exactly what a previous sync asked for.",
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","annotations":{"metacontroller.k8s.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"data\":{\"k\":\"v\"}}"}},"data":{"k":"v","added":"by someone"}}`,
			want:     metacontroller.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "n"}, "data": map[string]any{"k": "v"}},
		},
		"WithoutAnnotation": {
			reason:   "An object never applied by Metacontroller is kept as observed, minus server-owned metadata and status.",
			observed: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"9","labels":{"x":"y"}},"spec":{"type":"ClusterIP"},"status":{"loadBalancer":{}}}`,
			want:     metacontroller.Object{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "a", "namespace": "n", "labels": map[string]any{"x": "y"}}, "spec": map[string]any{"type": "ClusterIP"}},
		},
		"BrokenAnnotation": {
			reason:   "An annotation that does not decode falls back to the observed object.",
			observed: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","annotations":{"metacontroller.k8s.io/last-applied-configuration":"{not json"}},"data":{"k":"v"}}`,
			want:     metacontroller.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "n", "annotations": map[string]any{}}, "data": map[string]any{"k": "v"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := lastApplied(json.RawMessage(tc.observed))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nlastApplied: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
