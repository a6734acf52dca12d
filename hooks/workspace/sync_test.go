package workspace

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

// directives is a DirectiveSource for tests.
type directives struct {
	hash  string
	ok    bool
	block bool // wait for the caller's deadline, like a hung sidecar
}

func (d directives) RestartDirective(ctx context.Context, _, _ string) (string, bool) {
	if d.block {
		<-ctx.Done()
		return "", false
	}
	return d.hash, d.ok
}

func TestArtifactHash(t *testing.T) {
	running := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{v1alpha1.AnnotationArtifactBinaryHash: "running"}}}}}
	cases := map[string]struct {
		reason     string
		annotation string
		source     DirectiveSource
		deployment *appsv1.Deployment
		want       string
	}{
		"AnnotationFirst": {
			reason:     "The workspace's own annotation wins over a directive.",
			annotation: "annotated", source: directives{hash: "directed", ok: true}, deployment: running,
			want: "annotated",
		},
		"DirectiveNext": {
			reason: "Without an annotation, Cluster Control's directive applies.",
			source: directives{hash: "directed", ok: true}, deployment: running,
			want: "directed",
		},
		"KeepRunning": {
			reason: "Without either, the hash the pods run with stays, so a consumed directive is not undone.",
			source: directives{}, deployment: running,
			want: "running",
		},
		"HungSidecar": {
			reason: "A sidecar that does not answer means no directive, within the timeout.",
			source: directives{block: true}, deployment: running,
			want: "running",
		},
		"Nothing": {
			reason: "A new workspace with no directive has no hash.",
			want:   "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Directives: tc.source, DirectiveTimeout: 20 * time.Millisecond})
			ws := &v1alpha1.Workspace{}
			if tc.annotation != "" {
				ws.Annotations = map[string]string{v1alpha1.AnnotationArtifactBinaryHash: tc.annotation}
			}
			got := h.artifactHash(context.Background(), &observed{ws: ws, deployment: tc.deployment})
			if got != tc.want {
				t.Errorf("%s\nartifactHash: got %q, want %q", tc.reason, got, tc.want)
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
		"ClassOnly":      {reason: "Without datastores only the class is related.", spec: `{"clusterClass":"gold"}`, wantRules: 1},
		"WithDatastores": {reason: "Datastores add the namespace's claims.", spec: `{"clusterClass":"gold","datastores":[{"name":"db"}]}`, wantRules: 2},
	}
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
			for _, r := range resp.RelatedResources {
				if r.Resource == "resourceclaims" && (r.Namespace != "team-a" || r.LabelSelector == nil) {
					t.Errorf("%s\nclaims rule must select every claim in the workspace's namespace: %+v", tc.reason, r)
				}
			}
		})
	}
}
