package reporter

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/clustercontrol/ccapi"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func node(name string, labels map[string]string, conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("30Gi")},
			Conditions:  conds,
		},
	}
}

func cond(typ corev1.NodeConditionType, status corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: typ, Status: status}
}

func TestNodeReport(t *testing.T) {
	lim := limits{workspaces: 10, nodes: 10, pods: 10, nodeStale: time.Minute, podStale: time.Minute}
	type step struct {
		at   time.Duration
		node *corev1.Node
		pod  *observation.PodPlacement
	}
	cases := map[string]struct {
		reason string
		steps  []step
		at     time.Duration
		want   []ccapi.NodeHealth
	}{
		"HealthAndLabels": {
			reason: "Ready with no pressure is healthy; only formspec.dev labels are carried; conditions sorted",
			steps: []step{{node: node("a", map[string]string{"formspec.dev/node-type": "standard", "kubernetes.io/os": "linux"},
				cond(corev1.NodeReady, corev1.ConditionTrue), cond(corev1.NodeMemoryPressure, corev1.ConditionFalse))}},
			want: []ccapi.NodeHealth{{
				Name: "a", Health: "healthy",
				Conditions:  []ccapi.NodeCondition{{Type: "MemoryPressure", Status: "False"}, {Type: "Ready", Status: "True"}},
				Capacity:    ccapi.Resources{CPU: "8", Memory: "32Gi"},
				Allocatable: ccapi.Resources{CPU: "7910m", Memory: "30Gi"},
				Labels:      map[string]string{"formspec.dev/node-type": "standard"},
				ObservedAt:  t0,
			}},
		},
		"Pressure": {
			reason: "disk pressure degrades a Ready node; a node without Ready is degraded",
			steps: []step{
				{node: node("a", nil, cond(corev1.NodeReady, corev1.ConditionTrue), cond(corev1.NodeDiskPressure, corev1.ConditionTrue))},
				{node: node("b", nil)},
			},
			want: []ccapi.NodeHealth{
				{Name: "a", Health: "degraded", Conditions: []ccapi.NodeCondition{{Type: "DiskPressure", Status: "True"}, {Type: "Ready", Status: "True"}},
					Capacity: ccapi.Resources{CPU: "8", Memory: "32Gi"}, Allocatable: ccapi.Resources{CPU: "7910m", Memory: "30Gi"}, ObservedAt: t0},
				{Name: "b", Health: "degraded",
					Capacity: ccapi.Resources{CPU: "8", Memory: "32Gi"}, Allocatable: ccapi.Resources{CPU: "7910m", Memory: "30Gi"}, ObservedAt: t0},
			},
		},
		"WorkspaceCount": {
			reason: "distinct workspaces with a live pod count; terminated, terminating and moved pods do not",
			steps: []step{
				{node: node("a", nil, cond(corev1.NodeReady, corev1.ConditionTrue))},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "shop-1", Workspace: "shop", NodeName: "a", Phase: corev1.PodRunning}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "shop-2", Workspace: "shop", NodeName: "a", Phase: corev1.PodPending}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "blog-1", Workspace: "blog", NodeName: "a", Phase: corev1.PodRunning}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "blog-1", Workspace: "blog", NodeName: "a", Phase: corev1.PodRunning, Terminating: true}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "wiki-1", Workspace: "wiki", NodeName: "a", Phase: corev1.PodSucceeded}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "cms-1", Workspace: "cms", NodeName: "a", Phase: corev1.PodRunning}},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "cms-1", Workspace: "cms", NodeName: "b", Phase: corev1.PodRunning}},
			},
			want: []ccapi.NodeHealth{{Name: "a", Health: "healthy", Conditions: []ccapi.NodeCondition{{Type: "Ready", Status: "True"}},
				Capacity: ccapi.Resources{CPU: "8", Memory: "32Gi"}, Allocatable: ccapi.Resources{CPU: "7910m", Memory: "30Gi"},
				WorkspaceCount: 1, Workspaces: []string{"ns/shop"}, ObservedAt: t0}},
		},
		"AgeOut": {
			reason: "a node or pod not observed within its window is forgotten",
			steps: []step{
				{node: node("old", nil, cond(corev1.NodeReady, corev1.ConditionTrue))},
				{pod: &observation.PodPlacement{Namespace: "ns", Name: "shop-1", Workspace: "shop", NodeName: "new", Phase: corev1.PodRunning}},
				{at: 90 * time.Second, node: node("new", nil, cond(corev1.NodeReady, corev1.ConditionTrue))},
			},
			at: 90 * time.Second,
			want: []ccapi.NodeHealth{{Name: "new", Health: "healthy", Conditions: []ccapi.NodeCondition{{Type: "Ready", Status: "True"}},
				Capacity: ccapi.Resources{CPU: "8", Memory: "32Gi"}, Allocatable: ccapi.Resources{CPU: "7910m", Memory: "30Gi"},
				ObservedAt: t0.Add(90 * time.Second)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := newState(lim, func(string) {})
			for _, s := range tc.steps {
				if s.node != nil {
					st.observeNode(s.node, t0.Add(s.at))
				}
				if s.pod != nil {
					st.observePod(s.pod, t0.Add(s.at))
				}
			}
			got := st.nodeReport("r", t0.Add(tc.at))
			if diff := cmp.Diff(tc.want, got.Nodes); diff != "" {
				t.Errorf("%s\nnodes (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLimits checks that every map stops at its cap and counts the rest.
func TestLimits(t *testing.T) {
	dropped := map[string]int{}
	st := newState(limits{workspaces: 2, nodes: 1, pods: 1, nodeStale: time.Hour, podStale: time.Hour}, func(r string) { dropped[r]++ })
	for _, n := range []string{"a", "b", "c"} {
		st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: n, WorkspaceStatus: ccapi.WorkspaceStatus{Phase: "Ready"}}, t0)
		st.observeNode(node(n, nil), t0)
		st.observePod(&observation.PodPlacement{Namespace: "ns", Name: n, Workspace: "w", NodeName: "a", Phase: corev1.PodRunning}, t0)
	}
	st.setDirectives([]ccapi.Directive{
		{Namespace: "x", Name: "1", Action: ccapi.ActionRestartRequired, ArtifactHash: "h"},
		{Namespace: "x", Name: "2", Action: ccapi.ActionRestartRequired, ArtifactHash: "h"},
		{Namespace: "x", Name: "3", Action: ccapi.ActionRestartRequired, ArtifactHash: "h"},
	}, t0)
	want := map[string]int{dropWorkspaceLimit: 1, dropNodeLimit: 2, dropPodLimit: 2, dropDirectiveLimit: 1}
	if diff := cmp.Diff(want, dropped); diff != "" {
		t.Errorf("drops (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff(counts{Workspaces: 2, Pending: 2, Queue: 2, Directives: 2, Nodes: 1, Pods: 1}, st.counts()); diff != "" {
		t.Errorf("counts (-want, +got):\n%s", diff)
	}
}

// TestWorkspaceCoalescing checks change detection, latest-wins and what a
// send acknowledges.
func TestWorkspaceCoalescing(t *testing.T) {
	st := newState(limits{workspaces: 10}, func(string) {})
	ready := &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", WorkspaceStatus: ccapi.WorkspaceStatus{Phase: "Ready", Replicas: 1, ReadyReplicas: 1}}
	if !st.observeWorkspace(ready, t0) {
		t.Fatal("first observation did not queue a report")
	}
	if st.observeWorkspace(ready, t0.Add(time.Second)) {
		t.Error("an unchanged status queued a report")
	}
	p, _ := st.next()
	// A change while the first report is in flight must survive its ack.
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "shop", WorkspaceStatus: ccapi.WorkspaceStatus{Phase: "Degraded"}}, t0.Add(2*time.Second))
	st.finish(p, sent)
	if got := st.counts().Pending; got != 1 {
		t.Fatalf("pending after acking an outdated report: got %d, want 1", got)
	}
	p2, ok := st.next()
	if !ok || p2.key == p.key {
		t.Fatalf("next report: ok=%v, same key as the first=%v", ok, p2.key == p.key)
	}
	st.finish(p2, sent)
	st.deleteWorkspace("ns", "shop", t0.Add(3*time.Second))
	p3, _ := st.next()
	st.finish(p3, sent)
	if diff := cmp.Diff(counts{}, st.counts()); diff != "" {
		t.Errorf("a delivered deletion should forget the workspace (-want, +got):\n%s", diff)
	}
}

// TestDirectiveAlreadySatisfied covers a lost consumption report: the poll
// finds a directive the workspace already runs and reports it consumed.
func TestDirectiveAlreadySatisfied(t *testing.T) {
	st := newState(limits{workspaces: 10}, func(string) {})
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "shop", WorkspaceStatus: ccapi.WorkspaceStatus{Phase: "Ready", ArtifactHash: "h2"}}, t0)
	p, _ := st.next()
	st.finish(p, sent)
	if !st.setDirectives([]ccapi.Directive{{Namespace: "ns", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: "h2"}}, t0) {
		t.Fatal("a satisfied directive did not queue a consumption report")
	}
	if h, ok := st.directive("ns", "shop"); ok {
		t.Errorf("a satisfied directive is still served: %q", h)
	}
	p, _ = st.next()
	var rep ccapi.WorkspaceStatusReport
	if err := json.Unmarshal(p.body, &rep); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ccapi.RestartConsumed{ArtifactHash: "h2"}, rep.RestartConsumed); diff != "" {
		t.Errorf("restartConsumed (-want, +got):\n%s", diff)
	}
}

func TestParseRetryAfter(t *testing.T) {
	cases := map[string]struct {
		reason string
		value  string
		want   time.Duration
	}{
		"Seconds":  {reason: "delay-seconds", value: "7", want: 7 * time.Second},
		"Date":     {reason: "an HTTP date in the future", value: t0.Add(time.Minute).Format(http.TimeFormat), want: time.Minute},
		"PastDate": {reason: "a date in the past means now", value: t0.Add(-time.Minute).Format(http.TimeFormat), want: 0},
		"Huge":     {reason: "absurd values are capped", value: "86400", want: maxRetryAfter},
		"Garbage":  {reason: "garbage is ignored", value: "soon", want: 0},
		"Empty":    {reason: "absent", value: "", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseRetryAfter(tc.value, t0)); diff != "" {
				t.Errorf("%s (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(30 * time.Second)
	type call struct {
		at       time.Duration
		wantOK   bool
		wantHeld int
	}
	calls := []call{{0, true, 0}, {time.Second, false, 0}, {10 * time.Second, false, 0}, {31 * time.Second, true, 2}}
	for _, c := range calls {
		ok, held := l.allow("ep", t0.Add(c.at))
		if diff := cmp.Diff(call{c.at, c.wantOK, c.wantHeld}, call{c.at, ok, held}, cmp.AllowUnexported(call{})); diff != "" {
			t.Errorf("allow at %v (-want, +got):\n%s", c.at, diff)
		}
	}
}
