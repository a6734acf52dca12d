package state

import (
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestLimits checks that every map stops at its cap and counts the rest.
func TestLimits(t *testing.T) {
	dropped := map[string]int{}
	st := New(Limits{Workspaces: 2, Tombstones: 1, Nodes: 1, Pods: 1, Claims: 1, NodeStale: time.Hour, PodStale: time.Hour}, func(r string) { dropped[r]++ })
	for _, n := range []string{"a", "b", "c"} {
		st.ObserveWorkspace(wsStatus(n, "Ready", ""), t0)
		st.ObserveNode(node(n, nil), t0)
		st.ObservePod(&observation.PodPlacement{Namespace: "ns", Name: n, Workspace: "w", NodeName: "a", Phase: corev1.PodRunning}, t0)
		st.ObserveClaim(&observation.ClaimDecision{Namespace: "ns", Name: n}, t0)
	}
	st.SetDirectives([]ccapi.Directive{
		{Namespace: "x", Name: "1", Action: ccapi.ActionRestartRequired, ArtifactHash: digest(1)},
		{Namespace: "x", Name: "2", Action: ccapi.ActionIdle},
		{Namespace: "x", Name: "3", Action: ccapi.ActionWake},
	}, t0)
	// Two deletions of workspaces never seen: the second evicts the first.
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "gone", Name: "1"}, t0)
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "gone", Name: "2"}, t0.Add(time.Second))
	want := map[string]int{DropWorkspaceLimit: 1, DropNodeLimit: 2, DropPodLimit: 2, DropClaimLimit: 2, DropDirectiveLimit: 1, DropTombstoneLimit: 1}
	if diff := cmp.Diff(want, dropped); diff != "" {
		t.Errorf("drops (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff(Counts{Workspaces: 2, Tombstones: 1, Pending: 3, Queue: 4, Directives: 2, Nodes: 1, Pods: 1, Claims: 1}, st.Counts()); diff != "" {
		t.Errorf("counts (-want, +got):\n%s", diff)
	}
}
