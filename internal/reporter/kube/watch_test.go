package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/testkit/workspaceobj"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWatchedOf checks what the watch keeps of a Workspace: its requested
// and running hashes, idle annotation, phase and class, and when the
// managers owning the hash and idle annotations last wrote them.
func TestWatchedOf(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h0, h1 := "sha256:"+strings.Repeat("0", 64), "sha256:"+strings.Repeat("1", 64)
	cases := map[string]struct {
		reason     string
		obj        *unstructured.Unstructured
		wantFacts  observation.Milestones
		wantHashAt time.Time
		wantIdleAt time.Time
	}{
		"Rolling": {
			reason: "the reporter wrote the hash a minute ago; the pods still run the old one",
			obj: workspaceobj.Workspace("ns", "shop", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h0, "Progressing",
				workspaceobj.OwnsAnnotations("kubectl", t0.Add(-time.Hour), "owner.example/contact"),
				workspaceobj.OwnsAnnotations(FieldManager, t0.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash)),
			wantFacts:  observation.Milestones{Class: "zero", Phase: "Progressing", ArtifactHash: h0, WantedArtifactHash: h1},
			wantHashAt: t0.Add(-time.Minute),
		},
		"SharedOwners": {
			reason: "a person and the reporter both wrote the same hash: the later write counts",
			obj: workspaceobj.Workspace("ns", "shop", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1, v1alpha1.AnnotationIdle: "true"}, h1, "Idle",
				workspaceobj.OwnsAnnotations("kubectl", t0.Add(-2*time.Minute), v1alpha1.AnnotationArtifactBinaryHash),
				workspaceobj.OwnsAnnotations(FieldManager, t0.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash, v1alpha1.AnnotationIdle)),
			wantFacts:  observation.Milestones{Class: "zero", Phase: "Idle", ArtifactHash: h1, WantedArtifactHash: h1, Idle: true},
			wantHashAt: t0.Add(-time.Minute),
			wantIdleAt: t0.Add(-time.Minute),
		},
		"LabelOfTheSameName": {
			reason: "a manager owning a label named like the hash annotation wrote no annotation",
			obj: workspaceobj.Workspace("ns", "shop", nil, "", "Ready", metav1.ManagedFieldsEntry{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: t0}, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:` + v1alpha1.AnnotationArtifactBinaryHash + `":{}}}}`)}}),
			wantFacts: observation.Milestones{Class: "zero", Phase: "Ready"},
		},
		"Untouched": {
			reason:    "no annotation, no time",
			obj:       workspaceobj.Workspace("ns", "shop", nil, "", "Ready", workspaceobj.OwnsAnnotations("kubectl", t0, "owner.example/contact")),
			wantFacts: observation.Milestones{Class: "zero", Phase: "Ready"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := WorkspaceOf(tc.obj)
			if diff := cmp.Diff(tc.wantFacts, w.Seen.Milestones); diff != "" {
				t.Errorf("%s\nfacts (-want, +got):\n%s", tc.reason, diff)
			}
			if !w.Seen.HashSince.Equal(tc.wantHashAt) || !w.Seen.IdleSince.Equal(tc.wantIdleAt) {
				t.Errorf("%s\nhash written at %v, idle at %v; want %v, %v", tc.reason, w.Seen.HashSince, w.Seen.IdleSince, tc.wantHashAt, tc.wantIdleAt)
			}
		})
	}
}

// TestWorkspaceOfClaims checks what the watch keeps for the claims summary
// writer: the datastores asked for and the summary carried, an empty one
// told from none.
func TestWorkspaceOfClaims(t *testing.T) {
	u := workspaceobj.Workspace("ns", "shop", map[string]string{claimsummary.Annotation: ""}, "", "Ready")
	_ = unstructured.SetNestedSlice(u.Object, []any{
		map[string]any{"name": "orders"},
		map[string]any{"name": "users", "namespace": "shared"},
		"not an entry",
	}, "spec", "datastores")
	w := WorkspaceOf(u)
	want := []v1alpha1.DatastoreRef{{Name: "orders"}, {Name: "users", Namespace: "shared"}}
	if diff := cmp.Diff(want, w.Datastores); diff != "" {
		t.Errorf("datastores (-want, +got):\n%s", diff)
	}
	if !w.HasClaims || w.Claims != "" {
		t.Errorf("claims %q, %v; want an empty summary carried", w.Claims, w.HasClaims)
	}
	if w := WorkspaceOf(workspaceobj.Workspace("ns", "shop", nil, "", "Ready")); w.HasClaims || w.Datastores != nil {
		t.Errorf("a Workspace without datastores or summary kept %v, %v", w.Datastores, w.HasClaims)
	}
}
