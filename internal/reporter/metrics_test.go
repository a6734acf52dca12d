package reporter

import (
	"testing"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDropBounds checks that an observation dropped at each bound is
// counted with the bound it was dropped at, the label the alert names and
// formspec_reporter_limit shares.
func TestDropBounds(t *testing.T) {
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.MaxWorkspaces, cfg.MaxTombstones, cfg.MaxNodes, cfg.MaxPods, cfg.MaxClaims = 1, 1, 1, 1, 1
	r := newReporter(t, cfg)
	for _, n := range []string{"a", "b"} {
		for _, o := range []observation.Observation{
			wsObs("ns", n, "Ready", 1, ""),
			{WorkspaceDeleted: &observation.WorkspaceRef{Namespace: "gone", Name: n}},
			{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}},
			{Pod: &observation.PodPlacement{Namespace: "ns", Name: n, Workspace: "w", NodeName: "a", Phase: corev1.PodRunning}},
			{Claim: &observation.ClaimDecision{Namespace: "ns", Name: n, Granted: true, Reason: "Verified"}},
		} {
			if err := r.Observe(o); err != nil {
				t.Fatalf("Observe: %v", err)
			}
		}
	}
	families, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		Bound string
		Value float64
	}
	got := map[string]series{}
	for _, f := range families {
		if f.GetName() != "formspec_reporter_dropped_observations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var reason, bound string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "reason":
					reason = l.GetValue()
				case "bound":
					bound = l.GetValue()
				}
			}
			got[reason] = series{bound, m.GetCounter().GetValue()}
		}
	}
	want := map[string]series{
		state.DropWorkspaceLimit: {"workspaces", 1},
		state.DropTombstoneLimit: {"tombstones", 1},
		state.DropNodeLimit:      {"nodes", 1},
		state.DropPodLimit:       {"pods", 1},
		state.DropClaimLimit:     {"claims", 1},
		state.DropDirectiveLimit: {"workspaces", 0},
		state.DropAutoScaleLimit: {"autoscales", 0},
		state.DropInvalid:        {"", 0},
		state.DropRejected:       {"", 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formspec_reporter_dropped_observations_total by reason, -want, +got:\n%s", diff)
	}
}
