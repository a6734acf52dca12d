package workspace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

func TestJudgeMissing(t *testing.T) {
	asked := metav1.NewTime(clock.Add(-90 * time.Second))
	creating := func(since metav1.Time) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCreating, LastTransitionTime: since}
	}
	degraded := func(status metav1.ConditionStatus, reason string, since metav1.Time) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: status, Reason: reason, LastTransitionTime: since}
	}
	all := &Children{Services: map[string]*serviceView{"team-a/acme": {}}, ConfigMaps: map[string]*childView{"team-a/acme-config": {}}}
	noConfigMap := &Children{Services: map[string]*serviceView{"team-a/acme": {}}}
	dep := &appsv1.Deployment{}
	cases := map[string]struct {
		reason     string
		conditions []metav1.Condition
		children   *Children
		deployment *appsv1.Deployment
		// wantProblem names what the message must name; empty for no
		// problem.
		wantProblem []string
		wantResync  float64
	}{
		"AllThere": {
			reason:     "Nothing missing, nothing to judge, whatever the status says.",
			conditions: []metav1.Condition{creating(asked)},
			children:   all, deployment: dep,
		},
		"FirstSync": {
			reason:   "A workspace no sync has answered yet: no pass has tried to create anything.",
			children: &Children{},
		},
		"NotCreatingBefore": {
			reason:     "The status does not say Creating: the last sync saw everything, so this one's pass is the first to create the ConfigMap again.",
			conditions: []metav1.Condition{{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRollingOut, LastTransitionTime: asked}},
			children:   noConfigMap, deployment: dep,
		},
		"WithinGrace": {
			reason:     "Missing for 30 s of a 60 s grace: not yet a failure; a resync when the grace ends.",
			conditions: []metav1.Condition{creating(metav1.NewTime(clock.Add(-30 * time.Second)))},
			children:   noConfigMap, deployment: dep,
			wantResync: 30,
		},
		"PastGrace": {
			reason:     "Missing for 90 s: the create failed; the message names the child and how to see its owner.",
			conditions: []metav1.Condition{creating(asked), degraded(metav1.ConditionFalse, v1alpha1.ReasonAsExpected, created)},
			children:   noConfigMap, deployment: dep,
			wantProblem: []string{"ConfigMap team-a/acme-config", "kubectl get configmap acme-config -n team-a", "owned by another controller", "ResourceQuota", "admission"},
		},
		"EveryMissingNamed": {
			reason:      "A new workspace whose Deployment alone was not created: named, and only it.",
			conditions:  []metav1.Condition{creating(asked)},
			children:    all,
			wantProblem: []string{"Deployment team-a/acme not created", "kubectl get deployment acme -n team-a"},
		},
		"ClassJustFixed": {
			reason:     "Creating since the workspace was made, but its class was missing until 10 s ago (Degraded turned False then): nothing was asked for before, so the grace starts there.",
			conditions: []metav1.Condition{creating(created), degraded(metav1.ConditionFalse, v1alpha1.ReasonAsExpected, metav1.NewTime(clock.Add(-10*time.Second)))},
			children:   &Children{},
			wantResync: 50,
		},
		"ClassMissingLastSync": {
			reason:     "The last sync kept the children as they were (no class): it asked for nothing, whatever Progressing says.",
			conditions: []metav1.Condition{creating(created), degraded(metav1.ConditionTrue, v1alpha1.ReasonClusterClassNotFound, created)},
			children:   &Children{},
		},
		"StillNotCreated": {
			reason:     "Already Degraded for it: it stays so while the child is missing.",
			conditions: []metav1.Condition{creating(asked), degraded(metav1.ConditionTrue, v1alpha1.ReasonChildNotCreated, created)},
			children:   noConfigMap, deployment: dep,
			wantProblem: []string{"ConfigMap team-a/acme-config"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Now: func() time.Time { return clock }, ChildCreateGrace: time.Minute})
			o := &observed{
				ws: &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a", CreationTimestamp: created},
					Status: v1alpha1.WorkspaceStatus{Conditions: tc.conditions}},
				deployment: tc.deployment,
				hasService: tc.children.Services["team-a/acme"] != nil,
				children:   tc.children,
			}
			a := h.judgeMissing(o)
			if diff := cmp.Diff(tc.wantResync, a.resync); diff != "" {
				t.Errorf("%s\nresync: -want, +got:\n%s", tc.reason, diff)
			}
			switch {
			case len(tc.wantProblem) == 0 && a.problem != nil:
				t.Errorf("%s\ngot problem %+v, want none", tc.reason, a.problem)
			case len(tc.wantProblem) > 0 && a.problem == nil:
				t.Errorf("%s\ngot no problem, want %s", tc.reason, v1alpha1.ReasonChildNotCreated)
			case a.problem != nil:
				if a.problem.reason != v1alpha1.ReasonChildNotCreated {
					t.Errorf("%s\nreason %q, want %q", tc.reason, a.problem.reason, v1alpha1.ReasonChildNotCreated)
				}
				for _, n := range tc.wantProblem {
					if !strings.Contains(a.problem.message, n) {
						t.Errorf("%s\nmessage %q does not say %q", tc.reason, a.problem.message, n)
					}
				}
			}
		})
	}
}

// TestChildNotCreatedThroughSync follows a workspace whose ConfigMap
// cannot be created through three syncs, as Metacontroller would send
// them, each with the status the one before answered: Creating, then a
// resync asked for at the grace's end, then Degraded with the reason and
// a message that names the ConfigMap.
func TestChildNotCreatedThroughSync(t *testing.T) {
	base := fixtureRequest(t, "configmap-not-created")
	// The status of the sync before the ConfigMap went missing.
	status := &v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReplicasAvailable, LastTransitionTime: created},
		{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete, LastTransitionTime: created},
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected, LastTransitionTime: created},
	}}
	now := clock
	h := New(Config{Now: func() time.Time { return now }, ChildCreateGrace: 2 * time.Minute})
	sync := func() (*v1alpha1.WorkspaceStatus, float64) {
		t.Helper()
		var raw map[string]any
		if err := json.Unmarshal(base.body, &raw); err != nil {
			t.Fatal(err)
		}
		st, err := json.Marshal(status)
		if err != nil {
			t.Fatal(err)
		}
		raw["parent"].(map[string]any)["status"] = json.RawMessage(st)
		body, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		var req Request
		if err := req.Decode(body); err != nil {
			t.Fatal(err)
		}
		resp, err := h.Sync(t.Context(), &req)
		if err != nil {
			t.Fatal(err)
		}
		status = resp.Status.(*v1alpha1.WorkspaceStatus)
		return status, resp.ResyncAfterSeconds
	}

	st, resync := sync()
	if p := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); p.Reason != v1alpha1.ReasonCreating || !strings.Contains(p.Message, "ConfigMap acme-config") {
		t.Errorf("first sync: Progressing %s %q, want Creating naming the ConfigMap", p.Reason, p.Message)
	}
	if resync != 0 || meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Errorf("first sync: resync %v, Degraded %v; want none: no pass has tried to create it yet", resync, meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded))
	}

	now = now.Add(time.Second)
	if st, resync = sync(); resync != 119 || meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		t.Errorf("a second later: resync %v, want 119 (the grace ends 2 min after the first sync); Degraded %v, want False", resync, meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded))
	}

	now = now.Add(2 * time.Minute)
	st, resync = sync()
	d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonChildNotCreated || !strings.Contains(d.Message, "ConfigMap team-a/acme-config") || st.Phase != v1alpha1.PhaseDegraded {
		t.Errorf("past the grace: phase %s, Degraded %s %s %q; want Degraded, ChildNotCreated naming the ConfigMap", st.Phase, d.Status, d.Reason, d.Message)
	}
	if resync != 0 {
		t.Errorf("past the grace: resync %v, want none (Metacontroller's resync period and its retries of the failed create call again)", resync)
	}
}
