package reporter

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/internal/testkit/workspaceobj"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
		workspaceobj.Workspace("team-a", "shop", nil, h0, "Ready"),
		workspaceobj.Workspace("team-a", "blog", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h0, "Progressing",
			workspaceobj.OwnsAnnotations(kube.FieldManager, now.Add(-10*time.Second), v1alpha1.AnnotationArtifactBinaryHash)),
		workspaceobj.Workspace("team-a", "wiki", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h1, "Ready",
			workspaceobj.OwnsAnnotations(kube.FieldManager, now.Add(-time.Minute), v1alpha1.AnnotationArtifactBinaryHash)),
	} {
		if _, err := fc.dyn.Resource(kube.WorkspacesResource).Namespace("team-a").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
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
	blog := workspaceobj.Workspace("team-a", "blog", map[string]string{v1alpha1.AnnotationArtifactBinaryHash: h1}, h1, "Ready",
		workspaceobj.OwnsAnnotations(kube.FieldManager, now.Add(-10*time.Second), v1alpha1.AnnotationArtifactBinaryHash))
	if _, err := fc.dyn.Resource(kube.WorkspacesResource).Namespace("team-a").Update(ctx, blog, metav1.UpdateOptions{}); err != nil {
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
