package reporter

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
	st := newState(limits{workspaces: 2, tombstones: 1, nodes: 1, pods: 1, claims: 1, nodeStale: time.Hour, podStale: time.Hour}, func(r string) { dropped[r]++ })
	for _, n := range []string{"a", "b", "c"} {
		st.observeWorkspace(wsStatus(n, "Ready", ""), t0)
		st.observeNode(node(n, nil), t0)
		st.observePod(&observation.PodPlacement{Namespace: "ns", Name: n, Workspace: "w", NodeName: "a", Phase: corev1.PodRunning}, t0)
		st.observeClaim(&observation.ClaimDecision{Namespace: "ns", Name: n}, t0)
	}
	st.setDirectives([]ccapi.Directive{
		{Namespace: "x", Name: "1", Action: ccapi.ActionRestartRequired, ArtifactHash: digest(1)},
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
