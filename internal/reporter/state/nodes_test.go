package state

import (
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNodeReport(t *testing.T) {
	lim := Limits{Workspaces: 10, Nodes: 10, Pods: 10, NodeStale: time.Minute, PodStale: time.Minute}
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
			st := New(lim, func(string) {})
			for _, s := range tc.steps {
				if s.node != nil {
					st.ObserveNode(s.node, t0.Add(s.at))
				}
				if s.pod != nil {
					st.ObservePod(s.pod, t0.Add(s.at))
				}
			}
			got := st.NodeReport("r", t0.Add(tc.at))
			if diff := cmp.Diff(tc.want, got.Nodes); diff != "" {
				t.Errorf("%s\nnodes (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}
