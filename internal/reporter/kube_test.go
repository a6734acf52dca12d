package reporter

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
			map[schema.GroupVersionResource]string{kube.WorkspacesResource: "WorkspaceList"}, objs...),
		events: fake.NewClientset(),
	}
	return fc
}

// patchLog records the Workspace patches a fake cluster takes, in order.
type patchLog struct {
	mu     sync.Mutex
	keys   []string // namespace/name
	bodies []string
}

// recordPatches starts recording the cluster's Workspace patches.
func (fc *fakeCluster) recordPatches() *patchLog {
	l := &patchLog{}
	fc.dyn.PrependReactor("patch", "workspaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.keys = append(l.keys, a.GetNamespace()+"/"+a.(k8stesting.PatchAction).GetName())
		l.bodies = append(l.bodies, string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	return l
}

// patched returns the keys of the Workspaces patched, in order.
func (l *patchLog) patched() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.keys)
}

// patches returns the bodies of the patches, in order.
func (l *patchLog) patches() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.bodies)
}

func (fc *fakeCluster) clients() *KubeClients {
	return &KubeClients{Dynamic: fc.dyn, Events: fc.events.EventsV1()}
}

func (fc *fakeCluster) annotations(t *testing.T, key string) map[string]string {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	u, err := fc.dyn.Resource(kube.WorkspacesResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
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
	hash, next := digest(0xf1e2d), digest(0x2e47)
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t, "team-a/shop", "team-a/blog")
	cc.SetDirective("team-a", "shop", hash)
	if err := cc.PutDirective(ccapi.Directive{Namespace: "team-a", Name: "blog", Action: ccapi.ActionIdle}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	r := newReporter(t, cfg)
	// The hook server has synced both: the reporter writes directives
	// for Workspaces it has seen only.
	mustObserve(t, r, wsObs("team-a", "shop", "Ready", 2, digest(1)))
	mustObserve(t, r, wsObs("team-a", "blog", "Ready", 2, digest(1)))
	runLoops(t, r.runWorkspaceSender, r.runDeployStatus)

	testsync.WaitFor(t, "the directives to be written", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == hash &&
			fc.annotations(t, "team-a/blog")[v1alpha1.AnnotationIdle] == "true"
	})
	// Annotated but the pods still run the old binary: not consumed.
	mustObserve(t, r, observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "team-a", Name: "shop",
		Phase: "Progressing", ArtifactHash: digest(1), WantedArtifactHash: hash}})
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
	cc.SetDirective("team-a", "shop", next)
	testsync.WaitFor(t, "the next restart to be written", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == next
	})
	cc.DeleteDirective("team-a", "shop")
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	if got := fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash]; got != next {
		t.Errorf("a withdrawn directive changed the annotation to %q", got)
	}
}

// TestDirectivesRefusedUnwritten plays a Cluster Control that forges
// directives among a real one: for a Workspace the hook server never
// synced, for a namespace it serves nothing in (both exist in the
// cluster), and with a malformed hash. Only the real directive is
// patched; each forged one is counted once by reason and logged, the log
// rate-limited.
func TestDirectivesRefusedUnwritten(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t, "team-a/shop", "team-a/blog", "kube-system/coredns")
	patches := fc.recordPatches()
	cc.SetDirective("team-a", "blog", digest(2))
	cc.SetDirective("kube-system", "coredns", digest(2))
	if err := cc.PutDirective(ccapi.Directive{Namespace: "kube-system", Name: "coredns", Action: ccapi.ActionIdle}); err != nil {
		t.Fatal(err)
	}
	cc.SetDirective("team-b", "shop", "sha256:9b2c")
	cc.SetDirective("team-a", "shop", digest(2))
	logs := &testsync.Buffer{}
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	// A clock that never moves lets one log line through the limiter.
	cfg.now = func() time.Time { return t0 }
	r := newReporter(t, cfg)
	mustObserve(t, r, wsObs("team-a", "shop", "Ready", 2, digest(1)))
	runLoops(t, r.runDeployStatus)

	refused := func(reason string) float64 { return testutil.ToFloat64(r.m.directivesRefused.WithLabelValues(reason)) }
	testsync.WaitFor(t, "the real directive written and the forged ones refused", func() bool {
		return fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash] == digest(2) &&
			refused(state.RefuseUnknownWorkspace)+refused(state.RefuseForeignNamespace)+refused(state.RefuseInvalidHash) == 3
	})
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	// The reference Cluster Control holds one directive per workspace:
	// the idle replaced the restart of kube-system/coredns. team-b's
	// malformed hash names a foreign namespace too; the hash is checked
	// first, whatever the cluster holds.
	want := map[string]float64{state.RefuseInvalid: 0, state.RefuseInvalidHash: 1, state.RefuseForeignNamespace: 1, state.RefuseUnknownWorkspace: 1}
	got := map[string]float64{}
	for reason := range want {
		got[reason] = refused(reason)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused, by reason, after several polls (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"team-a/shop"}, patches.patched()); diff != "" {
		t.Errorf("Workspaces patched (-want, +got):\n%s", diff)
	}
	if n := strings.Count(logs.String(), "refusing directive"); n != 1 {
		t.Errorf("%d refusal log lines within one log interval, want 1 (rate-limited):\n%s", n, logs.String())
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
	patches := fc.recordPatches()
	for i := range 2 {
		cfg := fastConfig(url)
		cfg.Reporter = fmt.Sprintf("reporter-%d", i)
		cfg.Kube = fc.clients()
		r := newReporter(t, cfg)
		mustObserve(t, r, wsObs("team-a", "shop", "Ready", 2, digest(0)))
		runLoops(t, r.runDeployStatus)
	}
	for _, h := range []string{digest(1), digest(2), digest(3)} {
		cc.SetDirective("team-a", "shop", h)
		testsync.WaitFor(t, "both reporters to write "+h, func() bool {
			n := 0
			for _, p := range patches.patches() {
				if strings.Contains(p, h) {
					n++
				}
			}
			return n >= 2
		})
	}
	// Collapse repeats: the sequence of distinct values must be exactly
	// what was asked, with no value coming back after a newer one.
	var values []string
	for _, p := range patches.patches() {
		if len(values) == 0 || values[len(values)-1] != p {
			values = append(values, p)
		}
	}
	var want []string
	for n := 1; n <= 3; n++ {
		want = append(want, `{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"`+digest(n)+`"}}}`)
	}
	if diff := cmp.Diff(want, values); diff != "" {
		t.Errorf("annotation values written (-want, +got):\n%s", diff)
	}
	if got := fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationArtifactBinaryHash]; got != digest(3) {
		t.Errorf("final annotation %q, want %s", got, digest(3))
	}
}
