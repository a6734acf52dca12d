package reporter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeCluster is an in-memory API with Workspaces and Events.
type fakeCluster struct {
	dyn    *dynamicfake.FakeDynamicClient
	events *fake.Clientset
}

func newFakeCluster(t *testing.T, workspaces ...string) *fakeCluster {
	t.Helper()
	var objs []runtime.Object
	for _, k := range workspaces {
		ns, name, _ := strings.Cut(k, "/")
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v1alpha1.APIVersion)
		u.SetKind("Workspace")
		u.SetNamespace(ns)
		u.SetName(name)
		objs = append(objs, u)
	}
	fc := &fakeCluster{
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{workspacesResource: "WorkspaceList"}, objs...),
		events: fake.NewClientset(),
	}
	return fc
}

func (fc *fakeCluster) clients() *KubeClients {
	return &KubeClients{Dynamic: fc.dyn, Events: fc.events.EventsV1()}
}

func (fc *fakeCluster) annotations(t *testing.T, key string) map[string]string {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	u, err := fc.dyn.Resource(workspacesResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()
}

func (fc *fakeCluster) eventList(t *testing.T) []eventsv1.Event {
	t.Helper()
	l, err := fc.events.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b eventsv1.Event) int { return strings.Compare(a.Reason, b.Reason) })
	return l.Items
}

// TestDirectivesOntoWorkspaces follows each directive from Cluster Control
// onto its Workspace as an annotation, and back as consumed once the
// workspace shows it carried it out.
func TestDirectivesOntoWorkspaces(t *testing.T) {
	const hash = "sha256:0f1e2d"
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t, "team-a/shop", "team-a/blog")
	cc.SetDirective("team-a", "shop", hash)
	if err := cc.PutDirective(ccapi.Directive{Namespace: "team-a", Name: "blog", Action: ccapi.ActionIdle}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	r := newReporter(t, cfg)
	runLoops(t, r.runWorkspaceSender, r.runDeployStatus)

	testsync.WaitFor(t, "the directives to be written", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == hash &&
			fc.annotations(t, "team-a/blog")[v1alpha1.AnnotationIdle] == "true"
	})
	// Annotated but the pods still run the old binary: not consumed.
	mustObserve(t, r, observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "team-a", Name: "shop",
		Phase: "Progressing", ArtifactHash: "sha256:old", WantedArtifactHash: hash}})
	mustObserve(t, r, observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "team-a", Name: "blog",
		Phase: "Idle", Idle: true}})
	testsync.WaitFor(t, "the idle directive to be consumed", func() bool { return len(cc.Consumed()) == 1 })
	mustObserve(t, r, observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "team-a", Name: "shop",
		Phase: "Ready", ArtifactHash: hash, WantedArtifactHash: hash}})
	testsync.WaitFor(t, "the restart to be consumed", func() bool { return len(cc.Consumed()) == 2 })
	want := []clustercontrol.Consumption{
		{Namespace: "team-a", Name: "blog", Action: ccapi.ActionIdle},
		{Namespace: "team-a", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: hash},
	}
	if diff := cmp.Diff(want, cc.Consumed()); diff != "" {
		t.Errorf("consumed (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ccapi.Directive{}, cc.Directives(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("directives left in Cluster Control (-want, +got):\n%s", diff)
	}

	// Wake removes the annotation; withdrawing a directive changes nothing.
	if err := cc.PutDirective(ccapi.Directive{Namespace: "team-a", Name: "blog", Action: ccapi.ActionWake}); err != nil {
		t.Fatal(err)
	}
	testsync.WaitFor(t, "the wake to be written", func() bool {
		_, idle := fc.annotations(t, "team-a/blog")[v1alpha1.AnnotationIdle]
		return !idle
	})
	cc.SetDirective("team-a", "shop", "sha256:next")
	testsync.WaitFor(t, "the next restart to be written", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == "sha256:next"
	})
	cc.DeleteDirective("team-a", "shop")
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	if got := fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash]; got != "sha256:next" {
		t.Errorf("a withdrawn directive changed the annotation to %q", got)
	}
}

func mustObserve(t *testing.T, r *Reporter, o observation.Observation) {
	t.Helper()
	if err := r.Observe(o); err != nil {
		t.Fatal(err)
	}
}

// TestTwoReportersAgree runs the reporters of two replicas against one
// cluster and one Cluster Control while the directive for a workspace
// changes: every value the annotation takes is one Cluster Control asked
// for, in the order it asked, each written by both without a flip back.
func TestTwoReportersAgree(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t, "team-a/shop")
	var seen []string
	var mu sync.Mutex
	fc.dyn.PrependReactor("patch", "workspaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	for i := range 2 {
		cfg := fastConfig(url)
		cfg.Reporter = fmt.Sprintf("reporter-%d", i)
		cfg.Kube = fc.clients()
		r := newReporter(t, cfg)
		runLoops(t, r.runDeployStatus)
	}
	for _, h := range []string{"sha256:1", "sha256:2", "sha256:3"} {
		cc.SetDirective("team-a", "shop", h)
		testsync.WaitFor(t, "both reporters to write "+h, func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, p := range seen {
				if strings.Contains(p, h) {
					n++
				}
			}
			return n >= 2
		})
	}
	mu.Lock()
	defer mu.Unlock()
	// Collapse repeats: the sequence of distinct values must be exactly
	// what was asked, with no value coming back after a newer one.
	var values []string
	for _, p := range seen {
		if len(values) == 0 || values[len(values)-1] != p {
			values = append(values, p)
		}
	}
	want := []string{
		`{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"sha256:1"}}}`,
		`{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"sha256:2"}}}`,
		`{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"sha256:3"}}}`,
	}
	if diff := cmp.Diff(want, values); diff != "" {
		t.Errorf("annotation values written (-want, +got):\n%s", diff)
	}
	if got := fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash]; got != "sha256:3" {
		t.Errorf("final annotation %q, want sha256:3", got)
	}
}
