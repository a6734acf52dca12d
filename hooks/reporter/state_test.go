package reporter

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
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

func wsStatus(name, phase, hash string) *observation.WorkspaceStatus {
	return &observation.WorkspaceStatus{Namespace: "ns", Name: name, Phase: phase, ArtifactHash: hash}
}

// TestLimits checks that every map stops at its cap and counts the rest.
func TestLimits(t *testing.T) {
	dropped := map[string]int{}
	st := newState(limits{workspaces: 2, tombstones: 1, nodes: 1, pods: 1, claims: 1, nodeStale: time.Hour, podStale: time.Hour}, func(r string) { dropped[r]++ })
	for _, n := range []string{"a", "b", "c"} {
		st.observeWorkspace(wsStatus(n, "Ready", ""), t0)
		st.observeNode(node(n, nil), t0)
		st.observePod(&observation.PodPlacement{Namespace: "ns", Name: n, Workspace: "w", NodeName: "a", Phase: corev1.PodRunning}, t0)
		st.observeClaim(&observation.ClaimDecision{Namespace: "ns", Name: n}, t0)
	}
	st.setDirectives([]ccapi.Directive{
		{Namespace: "x", Name: "1", Action: ccapi.ActionRestartRequired, ArtifactHash: "h"},
		{Namespace: "x", Name: "2", Action: ccapi.ActionIdle},
		{Namespace: "x", Name: "3", Action: ccapi.ActionWake},
	}, t0)
	// Two deletions of workspaces never seen: the second evicts the first.
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "gone", Name: "1"}, t0)
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "gone", Name: "2"}, t0.Add(time.Second))
	want := map[string]int{dropWorkspaceLimit: 1, dropNodeLimit: 2, dropPodLimit: 2, dropClaimLimit: 2, dropDirectiveLimit: 1, dropTombstoneLimit: 1}
	if diff := cmp.Diff(want, dropped); diff != "" {
		t.Errorf("drops (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff(counts{Workspaces: 2, Tombstones: 1, Pending: 3, Queue: 4, Directives: 2, Nodes: 1, Pods: 1, Claims: 1}, st.counts()); diff != "" {
		t.Errorf("counts (-want, +got):\n%s", diff)
	}
}

// TestWorkspaceCoalescing checks change detection, latest-wins and what a
// send acknowledges.
func TestWorkspaceCoalescing(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	ready := &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", Replicas: 1, ReadyReplicas: 1}
	if ok, _ := st.observeWorkspace(ready, t0); !ok {
		t.Fatal("first observation did not queue a report")
	}
	if ok, _ := st.observeWorkspace(ready, t0.Add(time.Second)); ok {
		t.Error("an unchanged status queued a report")
	}
	p, _ := st.next()
	// A change while the first report is in flight must survive its ack.
	st.observeWorkspace(wsStatus("shop", "Degraded", ""), t0.Add(2*time.Second))
	st.finish(p, sent)
	if got := st.counts().Pending; got != 1 {
		t.Fatalf("pending after acking an outdated report: got %d, want 1", got)
	}
	p2, ok := st.next()
	if !ok || p2.key == p.key {
		t.Fatalf("next report: ok=%v, same key as the first=%v", ok, p2.key == p.key)
	}
	st.finish(p2, sent)
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "shop"}, t0.Add(3*time.Second))
	p3, _ := st.next()
	// A failed send keeps the tombstone, with the same bytes for the retry.
	st.finish(p3, retry)
	if got := st.counts().Tombstones; got != 1 {
		t.Fatalf("tombstones after a failed send: got %d, want 1", got)
	}
	p4, _ := st.next()
	if p4.key != p3.key {
		t.Errorf("a retried deletion changed its Idempotency-Key")
	}
	st.finish(p4, sent)
	if diff := cmp.Diff(counts{}, st.counts()); diff != "" {
		t.Errorf("a delivered deletion should forget the workspace (-want, +got):\n%s", diff)
	}
}

// TestResync checks the periodic re-report: every live workspace with
// nothing pending is queued again, with the time it was observed (so it
// never passes for newer than another reporter's view) and a new
// reportedAt (so Cluster Control applies it again).
func TestResync(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	st.observeWorkspace(wsStatus("shop", "Ready", ""), t0)
	st.observeWorkspace(wsStatus("blog", "Ready", ""), t0)
	for range 2 {
		p, _ := st.next()
		st.finish(p, sent)
	}
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "blog"}, t0.Add(time.Minute))
	if got := st.resync(t0.Add(10 * time.Minute)); got != 1 {
		t.Fatalf("resync queued %d reports, want 1 (the deleted workspace has its tombstone pending)", got)
	}
	var got []ccapi.WorkspaceStatusReport
	for {
		p, ok := st.next()
		if !ok {
			break
		}
		var rep ccapi.WorkspaceStatusReport
		if err := json.Unmarshal(p.body, &rep); err != nil {
			t.Fatal(err)
		}
		rep.Status = nil
		got = append(got, rep)
	}
	want := []ccapi.WorkspaceStatusReport{
		{Namespace: "ns", Name: "blog", ObservedAt: t0.Add(time.Minute), ReportedAt: t0.Add(time.Minute), Deleted: true},
		{Namespace: "ns", Name: "shop", ObservedAt: t0, ReportedAt: t0.Add(10 * time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports after resync (-want, +got):\n%s", diff)
	}
}

// TestDirectives holds the one rule for directives: when one is written
// onto its Workspace and when it is reported consumed.
func TestDirectives(t *testing.T) {
	restart := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: "h2"}
	idle := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	wake := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionWake}
	cases := map[string]struct {
		reason       string
		ws           *observation.WorkspaceStatus
		directive    ccapi.Directive
		wantWrite    bool
		wantConsumed *ccapi.DirectiveConsumed
	}{
		"RestartUnknownWorkspace": {
			reason:    "a workspace this reporter has not seen gets the write: the patch is idempotent",
			directive: restart,
			wantWrite: true,
		},
		"RestartNotAnnotated": {
			reason:    "the annotation is missing: write it",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: "h1"},
			directive: restart,
			wantWrite: true,
		},
		"RestartRolling": {
			reason:    "annotated but the pods still run the old hash: nothing to write, not consumed yet",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Progressing", ArtifactHash: "h1", WantedArtifactHash: "h2"},
			directive: restart,
		},
		"RestartDone": {
			reason:       "the pods run the hash: consumed (this also covers a lost consumption report)",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: "h2", WantedArtifactHash: "h2"},
			directive:    restart,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionRestartRequired, ArtifactHash: "h2"},
		},
		"IdleNotYet": {
			reason:    "no formspec.dev/idle yet: write it",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready"},
			directive: idle,
			wantWrite: true,
		},
		"IdleDone": {
			reason:       "annotated: consumed, whether or not the class lets it scale to zero",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", Idle: true},
			directive:    idle,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionIdle},
		},
		"WakeNotYet": {
			reason:    "still idle: remove the annotation",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Idle", Idle: true},
			directive: wake,
			wantWrite: true,
		},
		"WakeDone": {
			reason:       "not idle: consumed",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready"},
			directive:    wake,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionWake},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
			if tc.ws != nil {
				st.observeWorkspace(tc.ws, t0)
				p, _ := st.next()
				st.finish(p, sent)
			}
			st.setDirectives([]ccapi.Directive{tc.directive}, t0.Add(time.Second))
			var wantWrites []ccapi.Directive
			if tc.wantWrite {
				wantWrites = []ccapi.Directive{tc.directive}
			}
			if diff := cmp.Diff(wantWrites, st.toWrite()); diff != "" {
				t.Errorf("%s\nto write (-want, +got):\n%s", tc.reason, diff)
			}
			var got *ccapi.DirectiveConsumed
			if p, ok := st.next(); ok {
				var rep ccapi.WorkspaceStatusReport
				if err := json.Unmarshal(p.body, &rep); err != nil {
					t.Fatal(err)
				}
				got = rep.DirectiveConsumed
			}
			if diff := cmp.Diff(tc.wantConsumed, got); diff != "" {
				t.Errorf("%s\nconsumed (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDirectiveWrittenOnce checks that a directive is written once, not on
// every poll, and that withdrawing it writes nothing.
func TestDirectiveWrittenOnce(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	d := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	st.setDirectives([]ccapi.Directive{d}, t0)
	if got := st.toWrite(); len(got) != 1 {
		t.Fatalf("first poll: %d to write, want 1", len(got))
	}
	st.written(d)
	st.setDirectives([]ccapi.Directive{d}, t0.Add(time.Minute))
	if got := st.toWrite(); len(got) != 0 {
		t.Errorf("second poll wrote again: %v", got)
	}
	st.setDirectives(nil, t0.Add(2*time.Minute))
	if got := st.toWrite(); len(got) != 0 {
		t.Errorf("a withdrawn directive wrote: %v", got)
	}
	// Asked again after a withdrawal: written again.
	st.setDirectives([]ccapi.Directive{d}, t0.Add(3*time.Minute))
	if got := st.toWrite(); len(got) != 1 {
		t.Errorf("a directive asked again after its withdrawal: %d to write, want 1", len(got))
	}
}

// TestClassUsage checks the ClusterClass report: each class's limit with
// the live workspaces using it.
func TestClassUsage(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10, nodeStale: time.Hour, podStale: time.Hour, claimStale: time.Hour}, func(string) {})
	std := &observation.ClassInfo{Name: "standard", MaxWorkspaces: 40}
	for _, n := range []string{"a", "b", "c"} {
		st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: n, Phase: "Ready", ClusterClass: "standard", Class: std}, t0)
	}
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "d", Phase: "Ready", ClusterClass: "gpu",
		Class: &observation.ClassInfo{Name: "gpu"}}, t0)
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "e", Phase: "Degraded", ClusterClass: "missing"}, t0)
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "c"}, t0)
	want := []ccapi.ClassUsage{{Name: "gpu", WorkspaceCount: 1}, {Name: "standard", MaxWorkspaces: 40, WorkspaceCount: 2}}
	if diff := cmp.Diff(want, st.nodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage (-want, +got):\n%s", diff)
	}
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "d"}, t0)
	want = want[1:]
	if diff := cmp.Diff(want, st.nodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage after its last workspace went (-want, +got):\n%s", diff)
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
