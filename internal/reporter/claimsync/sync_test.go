package claimsync

import (
	"context"
	"errors"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

const ns = "team-a"

// object is an empty formspec.dev object of kind in namespace ns.
func object(kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": kind}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	return u
}

// workspaceObject is a Workspace asking for datastores, carrying
// annotations.
func workspaceObject(name string, annotations map[string]string, datastores ...string) *unstructured.Unstructured {
	u := object("Workspace", name)
	u.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(u.Object, "zero", "spec", "clusterClass")
	if len(datastores) > 0 {
		var entries []any
		for _, d := range datastores {
			entries = append(entries, map[string]any{"name": d})
		}
		_ = unstructured.SetNestedSlice(u.Object, entries, "spec", "datastores")
	}
	return u
}

// Claim states as the resourceclaim hook leaves them.
const (
	pending = ""
	granted = "granted"
	denied  = "denied"
)

// claimObject is a ResourceClaim of workspace for datastore, in state;
// a granted claim carries hash.
func claimObject(name, ws, datastore, state, hash string) *unstructured.Unstructured {
	u := object("ResourceClaim", name)
	_ = unstructured.SetNestedField(u.Object, ws, "spec", "workspace")
	_ = unstructured.SetNestedField(u.Object, datastore, "spec", "datastore", "name")
	_ = unstructured.SetNestedField(u.Object, "a grant the writer never reads", "spec", "grant", "signature")
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": "Verified", "message": "long text",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}
	}
	switch state {
	case granted:
		_ = unstructured.SetNestedSlice(u.Object, []any{cond(v1alpha1.ConditionReady)}, "status", "conditions")
		_ = unstructured.SetNestedField(u.Object, name+claimsummary.SecretSuffix, "status", "binding", "name")
		_ = unstructured.SetNestedField(u.Object, hash, "status", "credentialsHash")
	case denied:
		_ = unstructured.SetNestedSlice(u.Object, []any{cond(v1alpha1.ConditionDenied)}, "status", "conditions")
	}
	return u
}

// summary is the annotation value for claims given as name, datastore,
// state, hash in turn.
func summary(claims ...string) string {
	s := claimsummary.Summary{Claims: []claimsummary.Claim{}}
	for i := 0; i+3 < len(claims); i += 4 {
		c := claimsummary.Claim{Name: claims[i], Datastore: v1alpha1.DatastoreClaimRef{Name: claims[i+1], Namespace: ns}, State: claimsummary.StatePending}
		switch claims[i+2] {
		case granted:
			c.State, c.SecretName, c.CredentialsHash = claimsummary.StateReady, claims[i]+claimsummary.SecretSuffix, claims[i+3]
		case denied:
			c.State = claimsummary.StateDenied
		}
		s.Claims = append(s.Claims, c)
	}
	return claimsummary.Encode(s)
}

// cluster is a fake API server with Workspaces and ResourceClaims, and a
// writer watching it.
type cluster struct {
	t      *testing.T
	dyn    *dynamicfake.FakeDynamicClient
	leader atomic.Bool
	// blink makes a worker's next look at the Lease answer not elected,
	// once: a Lease lost and taken back between two of followLeadership's
	// looks, which never see it.
	blink atomic.Bool
	w     *Writer
	reg   *prometheus.Registry

	mu sync.Mutex
	// patches are the Workspace patches taken, by workspace name; the
	// leader flag as each arrived.
	patches     map[string][]string
	asNonLeader int
	evaluations map[string]int
	// fail makes the next patches of a workspace fail.
	fail map[string]int
}

func newCluster(t *testing.T, objs ...runtime.Object) *cluster {
	t.Helper()
	c := &cluster{t: t, patches: map[string][]string{}, evaluations: map[string]int{}, fail: map[string]int{}, reg: prometheus.NewRegistry()}
	c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.WorkspacesResource: "WorkspaceList", claimsResource: "ResourceClaimList",
	}, objs...)
	c.dyn.PrependReactor("patch", "workspaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.leader.Load() {
			c.asNonLeader++
		}
		if c.fail[name] > 0 {
			c.fail[name]--
			return true, nil, errors.New("the API server is having a bad day")
		}
		c.patches[name] = append(c.patches[name], string(a.(k8stesting.PatchAction).GetPatch()))
		return false, nil, nil
	})
	// The reporter's watch of Workspaces, run here as kube.Watch runs it
	// in the reporter.
	workspaces, err := kube.NewWorkspaceInformer(c.dyn)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Dynamic: c.dyn, Workspaces: workspaces, Leader: c.leading, Registerer: c.reg,
		Workers: 2, LeaderCheck: 10 * time.Millisecond, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.evaluated = func(k types.NamespacedName) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.evaluations[k.Name]++
	}
	c.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go workspaces.Run(ctx.Done())
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// leading is the writer's Leader function.
func (c *cluster) leading() bool {
	if c.blink.Load() && calledBy("claimsync.(*Writer).next") && c.blink.CompareAndSwap(true, false) {
		return false
	}
	return c.leader.Load()
}

// calledBy reports whether fn (a function name's package-qualified tail)
// is on the caller's stack.
func calledBy(fn string) bool {
	pcs := make([]uintptr, 32)
	frames := goruntime.CallersFrames(pcs[:goruntime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// settled waits until the writer has listed everything and has nothing
// left to do.
func (c *cluster) settled() {
	c.t.Helper()
	testsync.WaitFor(c.t, "the writer to settle", func() bool {
		return c.w.workspaces.HasSynced() && c.w.claims.HasSynced() && c.w.queue.Len() == 0 && c.idle()
	})
}

// idle reports whether the writer evaluated nothing for a moment. The
// queue's Len counts neither the workspaces being handled nor those
// waiting to be retried, so an empty queue alone does not show that the
// writer is done; a test asserting that something did not happen needs
// the quiet moment.
func (c *cluster) idle() bool {
	c.mu.Lock()
	before := maps(c.evaluations)
	c.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	return cmp.Equal(before, c.evaluations) && c.w.queue.Len() == 0
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *cluster) evaluationsOf(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evaluations[name]
}

func (c *cluster) patchesOf(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.patches[name])
}

// annotation returns the summary a Workspace carries, and whether it has
// one.
func (c *cluster) annotation(name string) (string, bool) {
	c.t.Helper()
	u, err := c.dyn.Resource(kube.WorkspacesResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	v, ok := u.GetAnnotations()[claimsummary.Annotation]
	return v, ok
}

func (c *cluster) waitAnnotation(name, want string) {
	c.t.Helper()
	testsync.WaitFor(c.t, name+" to carry "+want, func() bool {
		v, ok := c.annotation(name)
		return ok && v == want
	})
}

func (c *cluster) put(r schema.GroupVersionResource, u *unstructured.Unstructured) {
	c.t.Helper()
	ctx := context.Background()
	cur, err := c.dyn.Resource(r).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		if _, err := c.dyn.Resource(r).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	if _, err := c.dyn.Resource(r).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) writes(result string) float64 {
	return testutil.ToFloat64(c.w.m.writes.WithLabelValues(result))
}

// TestLeaderOnly: a reporter not elected writes nothing, however many
// workspaces need a summary; once elected it writes every one.
func TestLeaderOnly(t *testing.T) {
	c := newCluster(t,
		workspaceObject("shop", nil, "orders"), workspaceObject("blog", nil, "posts"),
		claimObject("shop-orders", "shop", "orders", granted, "h1"))
	c.settled()
	if got := c.patchesOf("shop"); len(got) != 0 {
		t.Fatalf("not elected, yet wrote %q", got)
	}
	c.leader.Store(true)
	c.waitAnnotation("shop", summary("shop-orders", "orders", granted, "h1"))
	c.waitAnnotation("blog", summary())
	c.settled()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asNonLeader != 0 {
		t.Errorf("%d patches arrived while not elected", c.asNonLeader)
	}
}

// TestOnlyWhenChanged: a Workspace that already carries its summary is not
// written again on election, nor evaluated on a change that leaves its
// datastores and summary alone (a status write, another annotation); a
// workspace without datastores gets no summary at all.
func TestOnlyWhenChanged(t *testing.T) {
	c := newCluster(t,
		workspaceObject("shop", map[string]string{claimsummary.Annotation: summary("shop-orders", "orders", granted, "h1")}, "orders"),
		workspaceObject("plain", nil),
		workspaceObject("blog", nil, "posts"),
		claimObject("shop-orders", "shop", "orders", granted, "h1"))
	c.leader.Store(true)
	c.waitAnnotation("blog", summary())
	c.settled()
	// An unrelated change of shop, then a change of blog's datastores:
	// the watch hands the writer changes in order, so once blog is
	// evaluated shop's change has been passed over.
	shopBefore, blogBefore := c.evaluationsOf("shop"), c.evaluationsOf("blog")
	shop := workspaceObject("shop", map[string]string{claimsummary.Annotation: summary("shop-orders", "orders", granted, "h1"), "note": "x"}, "orders")
	_ = unstructured.SetNestedField(shop.Object, "Ready", "status", "phase")
	c.put(kube.WorkspacesResource, shop)
	c.put(kube.WorkspacesResource, workspaceObject("blog", map[string]string{claimsummary.Annotation: summary()}, "posts", "comments"))
	testsync.WaitFor(t, "blog to be evaluated again", func() bool { return c.evaluationsOf("blog") > blogBefore })
	c.settled()
	if got := c.evaluationsOf("shop"); got != shopBefore {
		t.Errorf("shop's datastores and summary did not change, yet it was evaluated %d times more", got-shopBefore)
	}
	if got := c.patchesOf("shop"); len(got) != 0 {
		t.Errorf("shop already carried its summary, yet was written %q", got)
	}
	if got := c.patchesOf("plain"); len(got) != 0 {
		t.Errorf("plain asks for no datastore, yet was written %q", got)
	}
	if _, ok := c.annotation("plain"); ok {
		t.Error("plain carries a summary")
	}
	if got := c.writes(resultOK); got != 1 {
		t.Errorf("writes ok = %v, want 1 (blog)", got)
	}
}

// TestDatastoresEmptied: a workspace whose datastores are all removed
// loses its summary.
func TestDatastoresEmptied(t *testing.T) {
	c := newCluster(t, workspaceObject("shop", nil, "orders"), claimObject("shop-orders", "shop", "orders", granted, "h1"))
	c.leader.Store(true)
	c.waitAnnotation("shop", summary("shop-orders", "orders", granted, "h1"))
	c.put(kube.WorkspacesResource, workspaceObject("shop", map[string]string{claimsummary.Annotation: summary("shop-orders", "orders", granted, "h1")}))
	testsync.WaitFor(t, "the summary to be removed", func() bool {
		_, ok := c.annotation("shop")
		return !ok
	})
	got := c.patchesOf("shop")
	if diff := cmp.Diff(`{"metadata":{"annotations":{"formspec.dev/claims":null}}}`, got[len(got)-1]); diff != "" {
		t.Errorf("removing patch (-want, +got):\n%s", diff)
	}
}

// TestClaimChanges: each change of a claim (created, granted, rotated,
// denied, deleted) rewrites its own workspace's summary and evaluates no
// other workspace.
func TestClaimChanges(t *testing.T) {
	c := newCluster(t,
		workspaceObject("shop", nil, "orders"), workspaceObject("blog", nil, "posts"),
		claimObject("blog-posts", "blog", "posts", granted, "h0"))
	c.leader.Store(true)
	c.waitAnnotation("shop", summary())
	c.waitAnnotation("blog", summary("blog-posts", "posts", granted, "h0"))
	c.settled()
	blogEvaluations, blogPatches := c.evaluationsOf("blog"), len(c.patchesOf("blog"))

	for _, step := range []struct {
		name  string
		claim *unstructured.Unstructured
		want  string
	}{
		{"created", claimObject("shop-orders", "shop", "orders", pending, ""), summary("shop-orders", "orders", pending, "")},
		{"granted", claimObject("shop-orders", "shop", "orders", granted, "h1"), summary("shop-orders", "orders", granted, "h1")},
		{"rotated", claimObject("shop-orders", "shop", "orders", granted, "h2"), summary("shop-orders", "orders", granted, "h2")},
		{"denied", claimObject("shop-orders", "shop", "orders", denied, ""), summary("shop-orders", "orders", denied, "")},
	} {
		c.put(claimsResource, step.claim)
		c.waitAnnotation("shop", step.want)
		c.settled()
		if got := c.evaluationsOf("blog"); got != blogEvaluations {
			t.Errorf("%s: blog evaluated %d times more", step.name, got-blogEvaluations)
		}
	}
	if err := c.dyn.Resource(claimsResource).Namespace(ns).Delete(context.Background(), "shop-orders", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitAnnotation("shop", summary())
	c.settled()
	if got := c.evaluationsOf("blog"); got != blogEvaluations {
		t.Errorf("deleted: blog evaluated %d times more", got-blogEvaluations)
	}
	if got := len(c.patchesOf("blog")); got != blogPatches {
		t.Errorf("blog patched %d times more", got-blogPatches)
	}
}

// TestRetry: a failed write is counted and retried until it lands.
func TestRetry(t *testing.T) {
	c := newCluster(t, workspaceObject("shop", nil, "orders"), claimObject("shop-orders", "shop", "orders", granted, "h1"))
	c.mu.Lock()
	c.fail["shop"] = 2
	c.mu.Unlock()
	c.leader.Store(true)
	c.waitAnnotation("shop", summary("shop-orders", "orders", granted, "h1"))
	if got := c.writes(resultError); got != 2 {
		t.Errorf("failed writes = %v, want 2", got)
	}
	if got := c.writes(resultOK); got != 1 {
		t.Errorf("writes ok = %v, want 1", got)
	}
	if got, err := testutil.GatherAndCount(c.reg, "formspec_reporter_claims_summary_writes_total"); err != nil || got != 3 {
		t.Errorf("registered write series = %d, %v; want 3", got, err)
	}
}

// TestClaimOf: the cache keeps of a claim what its summary reads, and a
// status that does not decode grants nothing.
func TestClaimOf(t *testing.T) {
	bad := claimObject("c", "shop", "orders", granted, "h1")
	_ = unstructured.SetNestedField(bad.Object, "not a list", "status", "conditions")
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		want   claimsummary.Summary
	}{
		"Granted": {
			reason: "conditions, binding and hash kept",
			obj:    claimObject("c", "shop", "orders", granted, "h1"),
			want: claimsummary.Summary{Claims: []claimsummary.Claim{{Name: "c", Datastore: v1alpha1.DatastoreClaimRef{Name: "orders", Namespace: ns},
				State: claimsummary.StateReady, SecretName: "c-credentials", CredentialsHash: "h1"}}},
		},
		"BadStatus": {
			reason: "a status that does not decode reads as pending",
			obj:    bad,
			want: claimsummary.Summary{Claims: []claimsummary.Claim{{Name: "c", Datastore: v1alpha1.DatastoreClaimRef{Name: "orders", Namespace: ns},
				State: claimsummary.StatePending}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := kube.WorkspaceOf(workspaceObject("shop", nil, "orders"))
			got, _ := want(ws, []*v1alpha1.ResourceClaim{claimOf(tc.obj).rc})
			if diff := cmp.Diff(claimsummary.Encode(tc.want), got); diff != "" {
				t.Errorf("%s (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestClaimMoves: a claim edited to name another workspace leaves the
// summary of the one it named before.
func TestClaimMoves(t *testing.T) {
	c := newCluster(t,
		workspaceObject("shop", nil, "orders"), workspaceObject("blog", nil, "orders"),
		claimObject("orders", "shop", "orders", granted, "h1"))
	c.leader.Store(true)
	c.waitAnnotation("shop", summary("orders", "orders", granted, "h1"))
	c.waitAnnotation("blog", summary())
	c.put(claimsResource, claimObject("orders", "blog", "orders", granted, "h1"))
	c.waitAnnotation("blog", summary("orders", "orders", granted, "h1"))
	c.waitAnnotation("shop", summary())
}

// TestLeaseBlink: a workspace dropped while the Lease was lost for a
// moment, too short for the writer's look at the Lease to see it, is
// still written once the Lease is back: nothing else would queue it
// again, as a status write no longer does.
func TestLeaseBlink(t *testing.T) {
	c := newCluster(t, workspaceObject("shop", nil, "orders"))
	c.leader.Store(true)
	c.waitAnnotation("shop", summary())
	c.settled()
	c.blink.Store(true)
	c.put(claimsResource, claimObject("shop-orders", "shop", "orders", granted, "h1"))
	c.waitAnnotation("shop", summary("shop-orders", "orders", granted, "h1"))
}

// TestSummaryInputs: which Workspace updates queue it.
func TestSummaryInputs(t *testing.T) {
	base := func() *unstructured.Unstructured {
		return workspaceObject("shop", map[string]string{claimsummary.Annotation: summary()}, "orders")
	}
	cases := map[string]struct {
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		"StatusOnly": {change: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "Ready", "status", "phase")
		}},
		"OtherAnnotation": {change: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{claimsummary.Annotation: summary(), "note": "x"})
		}},
		"Datastores": {change: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "users"}}, "spec", "datastores")
		}, want: true},
		"SummaryEdited": {change: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{claimsummary.Annotation: "{}"})
		}, want: true},
		"SummaryRemoved": {change: func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, want: true},
		"Recreated":      {change: func(u *unstructured.Unstructured) { u.SetUID("uid-shop-2") }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur := base()
			tc.change(cur)
			if got := summaryInputs(kube.WorkspaceOf(base()), kube.WorkspaceOf(cur)); got != tc.want {
				t.Errorf("queued = %v, want %v", got, tc.want)
			}
		})
	}
}
