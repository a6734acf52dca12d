package workspace

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestFrozen decodes observed children as the server does, freezes them
// and encodes them as the response does.
func TestFrozen(t *testing.T) {
	const applied = `"metacontroller.k8s.io/last-applied-configuration":"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{\"replicas\":2}}"`
	cases := map[string]struct {
		reason   string
		children string
		freeze   freeze
		want     string
	}{
		"FromAnnotation": {
			reason:   "What Metacontroller last applied is exactly what a previous sync asked for.",
			children: `{"ConfigMap.v1":{"n/a":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","annotations":{"metacontroller.k8s.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"data\":{\"k\":\"v\"}}"}},"data":{"k":"v","added":"by someone"}}}}`,
			want:     `[{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}]`,
		},
		"WithoutAnnotation": {
			reason:   "A child never applied with an annotation (server-side apply) is kept as observed, minus server-owned metadata and status.",
			children: `{"Service.v1":{"n/a":{"metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"9","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"x":"y"}},"spec":{"type":"ClusterIP"},"status":{"loadBalancer":{}}}}}`,
			want:     `[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n","labels":{"x":"y"}},"spec":{"type":"ClusterIP"}}]`,
		},
		"BrokenAnnotation": {
			reason:   "An annotation that does not decode falls back to the observed object, without the annotation.",
			children: `{"ConfigMap.v1":{"n/a":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","annotations":{"metacontroller.k8s.io/last-applied-configuration":"{not json","keep":"me"}},"data":{"k":"v"}}}}`,
			want:     `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","annotations":{"keep":"me"}},"data":{"k":"v"}}]`,
		},
		"Teardown": {
			reason:   "Teardown drops the HPA and sets the Deployment's replicas to zero, whether it was applied with an annotation or not.",
			children: `{"Deployment.apps/v1":{"n/a":{"metadata":{"name":"a","namespace":"n","annotations":{` + applied + `}},"spec":{"replicas":4}},"n/b":{"metadata":{"name":"b","namespace":"n"},"spec":{"replicas":4,"selector":{"matchLabels":{"k":"v"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"k":"v"}},"spec":{"containers":[{"name":"c"}]}}}}},"HorizontalPodAutoscaler.autoscaling/v2":{"n/a":{"metadata":{"name":"a","namespace":"n"},"spec":{"maxReplicas":5}}}}`,
			freeze:   freeze{dropHPAs: true, replicas: ptr.To[int32](0)},
			want:     `[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","namespace":"n"},"spec":{"replicas":0}},{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b","namespace":"n"},"spec":{"replicas":0,"selector":{"matchLabels":{"k":"v"}},"strategy":{},"template":{"metadata":{"labels":{"k":"v"}},"spec":{"containers":[{"name":"c","resources":{}}]}}}}]`,
		},
		"ObservedDeploymentWhole": {
			reason:   "An observed Deployment is kept with every field of its pod spec, those the API server defaulted and those buildDeployment never sets.",
			children: `{"Deployment.apps/v1":{"n/a":{"metadata":{"name":"a","namespace":"n"},"spec":{"replicas":2,"selector":{"matchLabels":{"k":"v"}},"template":{"metadata":{"labels":{"k":"v"}},"spec":{"dnsPolicy":"ClusterFirst","restartPolicy":"Always","initContainers":[{"name":"init","imagePullPolicy":"IfNotPresent"}],"containers":[{"name":"c","terminationMessagePath":"/dev/termination-log"}]}}}}}}`,
			freeze:   freeze{keepObservedReplicas: true},
			want:     `[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","namespace":"n"},"spec":{"replicas":2,"selector":{"matchLabels":{"k":"v"}},"strategy":{},"template":{"metadata":{"labels":{"k":"v"}},"spec":{"initContainers":[{"name":"init","resources":{},"imagePullPolicy":"IfNotPresent"}],"containers":[{"name":"c","resources":{},"terminationMessagePath":"/dev/termination-log"}],"restartPolicy":"Always","dnsPolicy":"ClusterFirst"}}}}]`,
		},
		"ObservedServiceWhole": {
			reason:   "An observed Service is kept with every field of its spec, those buildService never sets too.",
			children: `{"Service.v1":{"n/a":{"metadata":{"name":"a","namespace":"n"},"spec":{"type":"ClusterIP","clusterIP":"10.0.0.7","sessionAffinity":"None","ports":[{"name":"http","port":80,"targetPort":8080,"protocol":"TCP"}]}}}}`,
			want:     `[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n"},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":8080}],"clusterIP":"10.0.0.7","type":"ClusterIP","sessionAffinity":"None"}}]`,
		},
		"KeepObservedReplicas": {
			reason:   "A workspace frozen because its class is missing keeps the replica count it runs now, not the one last applied.",
			children: `{"Deployment.apps/v1":{"n/a":{"metadata":{"name":"a","namespace":"n","annotations":{` + applied + `}},"spec":{"replicas":4}}},"HorizontalPodAutoscaler.autoscaling/v2":{"n/a":{"metadata":{"name":"a","namespace":"n"},"spec":{"maxReplicas":5}}}}`,
			freeze:   freeze{keepObservedReplicas: true},
			want:     `[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","namespace":"n"},"spec":{"replicas":4}},{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"a","namespace":"n"},"spec":{"scaleTargetRef":{"kind":"","name":""},"maxReplicas":5}}]`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var req Request
			if err := req.Decode([]byte(`{"children":` + tc.children + `}`)); err != nil {
				t.Fatal(err)
			}
			children, err := frozen(&observed{whole: req.whole}, tc.freeze)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal((&desired{children: children}).response().Children)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\nfrozen: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestFreezeWithoutBody: a request built in Go rather than decoded (render,
// tests) freezes fine when it observes no children, and fails loudly, not
// silently empty, when it does.
func TestFreezeWithoutBody(t *testing.T) {
	parent := &Parent{Metadata: ParentMeta{Name: "a", Namespace: "n"}, Spec: json.RawMessage(`{"clusterClass":"gone"}`)}
	h := New(Config{})
	resp, err := h.Sync(t.Context(), &Request{Parent: parent})
	if err != nil {
		t.Fatalf("no children observed: %v", err)
	}
	if len(resp.Children) != 0 {
		t.Errorf("no children observed: got %d children, want none", len(resp.Children))
	}
	withChild := &Request{Parent: parent, Children: Children{ConfigMaps: map[string]*childView{"n/a-config": {}}}}
	if _, err := h.Sync(t.Context(), withChild); err == nil {
		t.Error("children observed but no body kept: got no error, want one")
	}
}
