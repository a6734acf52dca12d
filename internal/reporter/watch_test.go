package reporter

import (
	"context"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// workspaceObject is a Workspace as the API server serves it: annotations,
// a status, and managedFields saying who wrote which annotation when.
func workspaceObject(ns, name string, annotations map[string]string, running, phase string, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.APIVersion)
	u.SetKind("Workspace")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetAnnotations(annotations)
	u.SetManagedFields(managed)
	_ = unstructured.SetNestedField(u.Object, "zero", "spec", "clusterClass")
	_ = unstructured.SetNestedField(u.Object, running, "status", "artifactHash")
	_ = unstructured.SetNestedField(u.Object, phase, "status", "phase")
	return u
}

// ownsAnnotations is a managedFields entry of manager owning keys, written
// at.
func ownsAnnotations(manager string, at time.Time, keys ...string) metav1.ManagedFieldsEntry {
	fields := `{"f:metadata":{"f:annotations":{".":{}`
	for _, k := range keys {
		fields += `,"f:` + k + `":{}`
	}
	fields += `}}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at},
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// TestWatchedOf checks what the watch keeps of a Workspace: its requested
// and running hashes, idle annotation, phase and class, and when the
// managers owning the hash and idle annotations last wrote them.
func TestWatchedOf(t *testing.T) {
	h0, h1 := digest(0), digest(1)
	cases := map[string]struct {
		reason     string
		obj        *unstructured.Unstructured
		wantFacts  observation.Milestones
		wantHashAt time.Time
		wantIdleAt time.Time
	}{
		"Rolling": {
			reason: "the reporter wrote the hash a minute ago; the pods still run the old one",
			obj: workspaceObject("ns", "shop", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h0, "Progressing",
				ownsAnnotations("kubectl", t0.Add(-time.Hour), "owner.example/contact"),
				ownsAnnotations(FieldManager, t0.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash)),
			wantFacts:  observation.Milestones{Class: "zero", Phase: "Progressing", ArtifactHash: h0, WantedArtifactHash: h1},
			wantHashAt: t0.Add(-time.Minute),
		},
		"SharedOwners": {
			reason: "a person and the reporter both wrote the same hash: the later write counts",
			obj: workspaceObject("ns", "shop", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1, v1alpha1.AnnotationIdle: "true"}, h1, "Idle",
				ownsAnnotations("kubectl", t0.Add(-2*time.Minute), v1alpha1.AnnotationArtifactBinaryHash),
				ownsAnnotations(FieldManager, t0.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash, v1alpha1.AnnotationIdle)),
			wantFacts:  observation.Milestones{Class: "zero", Phase: "Idle", ArtifactHash: h1, WantedArtifactHash: h1, Idle: true},
			wantHashAt: t0.Add(-time.Minute),
			wantIdleAt: t0.Add(-time.Minute),
		},
		"Untouched": {
			reason:    "no annotation, no time",
			obj:       workspaceObject("ns", "shop", nil, "", "Ready", ownsAnnotations("kubectl", t0, "owner.example/contact")),
			wantFacts: observation.Milestones{Class: "zero", Phase: "Ready"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := watchedOf(tc.obj)
			if diff := cmp.Diff(tc.wantFacts, w.seen.Milestones); diff != "" {
				t.Errorf("%s\nfacts (-want, +got):\n%s", tc.reason, diff)
			}
			if !w.seen.HashSince.Equal(tc.wantHashAt) || !w.seen.IdleSince.Equal(tc.wantIdleAt) {
				t.Errorf("%s\nhash written at %v, idle at %v; want %v, %v", tc.reason, w.seen.HashSince, w.seen.IdleSince, tc.wantHashAt, tc.wantIdleAt)
			}
		})
	}
}

// TestBudgetCountsFromTheWatch runs the writing reporter with no
// observation from its hook server of a rollout the other replica's syncs
// alone showed: it learns of it, and of its end, from its watch of the
// Workspaces. With a budget of one restart at once, the directive for
// shop waits while blog rolls, and is written once the watch shows
// blog's pods on the new hash; a restart written a minute before (the
// managedFields of wiki) keeps wiki's interval.
func TestBudgetCountsFromTheWatch(t *testing.T) {
	h0, h1 := digest(0), digest(1)
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t)
	ctx := context.Background()
	now := time.Now()
	for _, obj := range []*unstructured.Unstructured{
		workspaceObject("team-a", "shop", nil, h0, "Ready"),
		workspaceObject("team-a", "blog", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h0, "Progressing",
			ownsAnnotations(FieldManager, now.Add(-10*time.Second), v1alpha1.AnnotationArtifactBinaryHash)),
		workspaceObject("team-a", "wiki", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h1, "Ready",
			ownsAnnotations(FieldManager, now.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash)),
	} {
		if _, err := fc.dyn.Resource(workspacesResource).Namespace("team-a").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patches := fc.recordPatches()
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	cfg.RestartBudget = Budget{Share: 0.1, MinInterval: time.Hour}
	r := newReporter(t, cfg)
	runLoops(t, r.runWatch, r.runDeployStatus)
	testsync.WaitFor(t, "the watch to list the Workspaces", r.st.Listed)
	cc.SetDirective("team-a", "shop", digest(2))
	cc.SetDirective("team-a", "wiki", digest(2))
	testsync.WaitFor(t, "both restarts to wait", func() bool { return r.st.Counts().WaitingRestarts == 2 })
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	if got := patches.patched(); len(got) != 0 {
		t.Fatalf("patched %v while blog rolls and wiki's interval runs", got)
	}

	// The other replica's hook server sees blog's pods on h1; Metacontroller
	// writes its status, which only the watch shows this reporter.
	blog := workspaceObject("team-a", "blog", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h1, "Ready",
		ownsAnnotations(FieldManager, now.Add(-10*time.Second), v1alpha1.AnnotationArtifactBinaryHash))
	if _, err := fc.dyn.Resource(workspacesResource).Namespace("team-a").Update(ctx, blog, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsync.WaitFor(t, "shop's restart to be written once blog's rollout is over", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == digest(2)
	})
	polls = len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	if diff := cmp.Diff([]string{"team-a/shop"}, patches.patched()); diff != "" {
		t.Errorf("patched (-want, +got): wiki's interval must hold\n%s", diff)
	}
}
