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
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
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
	cases := map[string]struct {
		reason    string
		claims    ClaimsSource
		spec      string
		wantRules int
	}{
		"ClassOnly":             {reason: "Without datastores only the class is related.", claims: ClaimsRelated, spec: `{"clusterClass":"gold"}`, wantRules: 1},
		"WithDatastores":        {reason: "Datastores add the namespace's claims.", claims: ClaimsRelated, spec: `{"clusterClass":"gold","datastores":[{"name":"db"}]}`, wantRules: 2},
		"SummaryWithDatastores": {reason: "In summary mode no claim is related: the summary comes on the Workspace.", spec: `{"clusterClass":"gold","datastores":[{"name":"db"}]}`, wantRules: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Claims: tc.claims})
			parent := json.RawMessage(`{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"acme","namespace":"team-a"},"spec":` + tc.spec + `}`)
			resp, err := h.Customize(context.Background(), &metacontroller.CustomizeRequest{Parent: parent})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.RelatedResources) != tc.wantRules {
				t.Errorf("%s\nrules: got %d, want %d: %+v", tc.reason, len(resp.RelatedResources), tc.wantRules, resp.RelatedResources)
			}
			for _, r := range resp.RelatedResources {
				if r.Resource == "resourceclaims" && (r.Namespace != "team-a" || r.LabelSelector == nil) {
					t.Errorf("%s\nclaims rule must select every claim in the workspace's namespace: %+v", tc.reason, r)
				}
				// Metacontroller maps every write of a related kind to its
				// parents by going through all of them: a rule for a kind
				// written as often as the children's would make every such
				// write cost a pass over the fleet (missing.go).
				if r.Resource != "clusterclasses" && r.Resource != "resourceclaims" {
					t.Errorf("%s\nrule for %s: only ClusterClasses and ResourceClaims may be related: %+v", tc.reason, r.Resource, r)
				}
			}
		})
	}
}
