package workspace

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

func TestArtifactHash(t *testing.T) {
	running := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{v1alpha1.AnnotationArtifactBinaryHash: "running"}}}}}
	cases := map[string]struct {
		reason     string
		annotation string
		deployment *appsv1.Deployment
		want       string
	}{
		"AnnotationFirst": {
			reason:     "The workspace's annotation (a person's, or the reporter's for a directive) wins over what runs.",
			annotation: "annotated", deployment: running,
			want: "annotated",
		},
		"KeepRunning": {
			reason:     "Without an annotation the hash the pods run with stays, so a removed annotation does not roll them back.",
			deployment: running,
			want:       "running",
		},
		"Nothing": {
			reason: "A new workspace without an annotation has no hash.",
			want:   "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := &v1alpha1.Workspace{}
			if tc.annotation != "" {
				ws.Annotations = map[string]string{v1alpha1.AnnotationArtifactBinaryHash: tc.annotation}
			}
			got := artifactHash(&observed{ws: ws, deployment: tc.deployment})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nartifactHash: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCustomize(t *testing.T) {
	h := New(Config{})
	cases := map[string]struct {
		reason    string
		spec      string
		wantRules int
	}{
		"ClassOnly":      {reason: "Without datastores the class is related, and the objects at the children's names.", spec: `{"clusterClass":"gold"}`, wantRules: 4},
		"WithDatastores": {reason: "Datastores add the namespace's claims.", spec: `{"clusterClass":"gold","datastores":[{"name":"db"}]}`, wantRules: 5},
	}
	t.Run("IgnoreChildNames", func(t *testing.T) {
		parent := json.RawMessage(`{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"acme","namespace":"team-a"},"spec":{"clusterClass":"gold"}}`)
		resp, err := New(Config{IgnoreChildNames: true}).Customize(context.Background(), &metacontroller.CustomizeRequest{Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.RelatedResources) != 1 || resp.RelatedResources[0].Resource != "clusterclasses" {
			t.Errorf("--check-child-names=false still asks for the objects at the children's names: %+v", resp.RelatedResources)
		}
	})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parent := json.RawMessage(`{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"acme","namespace":"team-a"},"spec":` + tc.spec + `}`)
			resp, err := h.Customize(context.Background(), &metacontroller.CustomizeRequest{Parent: parent})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.RelatedResources) != tc.wantRules {
				t.Errorf("%s\nrules: got %d, want %d: %+v", tc.reason, len(resp.RelatedResources), tc.wantRules, resp.RelatedResources)
			}
			names := map[string][]string{}
			for _, r := range resp.RelatedResources {
				if r.Resource == "resourceclaims" && (r.Namespace != "team-a" || r.LabelSelector == nil) {
					t.Errorf("%s\nclaims rule must select every claim in the workspace's namespace: %+v", tc.reason, r)
				}
				if r.Resource == "deployments" || r.Resource == "services" || r.Resource == "configmaps" {
					if r.Namespace != "team-a" || r.LabelSelector != nil {
						t.Errorf("%s\n%s rule must name objects in the workspace's namespace only: %+v", tc.reason, r.Resource, r)
					}
					names[r.Resource] = r.Names
				}
			}
			want := map[string][]string{"deployments": {"acme"}, "services": {"acme"}, "configmaps": {"acme-config"}}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("%s\nthe objects at the children's names: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
