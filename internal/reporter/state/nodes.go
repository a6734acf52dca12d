package state

import (
	"slices"
	"strings"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nodeEntry is a node's latest summary and when it was last observed.
type nodeEntry struct {
	health   ccapi.NodeHealth
	lastSeen time.Time
}

// podEntry is where a live workspace pod runs, counted towards its node
// until it goes unobserved for lim.PodStale.
type podEntry struct {
	workspace types.NamespacedName
	node      string
	live      bool
	lastSeen  time.Time
}

// ObserveNode records a node's latest state.
func (s *State) ObserveNode(n *corev1.Node, now time.Time) {
	h := summarizeNode(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.nodes[n.Name]
	if !ok {
		if len(s.nodes) >= s.lim.Nodes {
			s.drop(DropNodeLimit)
			return
		}
		e = &nodeEntry{}
		s.nodes[n.Name] = e
	}
	e.health, e.lastSeen = h, now
}

// ObservePod records where a workspace pod runs.
func (s *State) ObservePod(p *observation.PodPlacement, now time.Time) {
	k := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	live := !p.Terminating && p.NodeName != "" && (p.Phase == corev1.PodPending || p.Phase == corev1.PodRunning || p.Phase == "")
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.pods[k]
	if !ok {
		if !live {
			// Nothing to count and nothing to forget: keep no entry.
			return
		}
		if len(s.pods) >= s.lim.Pods {
			s.drop(DropPodLimit)
			return
		}
		e = &podEntry{}
		s.pods[k] = e
	}
	if !live {
		delete(s.pods, k)
		return
	}
	e.workspace, e.node, e.live, e.lastSeen = types.NamespacedName{Namespace: p.Namespace, Name: p.Workspace}, p.NodeName, live, now
}

// NodeReport builds the node-health body and forgets nodes and pods that
// have not been observed within their staleness window: Metacontroller does
// not tell a decorator hook about deletions, so silence is the signal.
func (s *State) NodeReport(reporter string, now time.Time) ccapi.NodeHealthReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	perNode := map[string]map[types.NamespacedName]bool{}
	for k, p := range s.pods {
		if now.Sub(p.lastSeen) > s.lim.PodStale {
			delete(s.pods, k)
			continue
		}
		if perNode[p.node] == nil {
			perNode[p.node] = map[types.NamespacedName]bool{}
		}
		perNode[p.node][p.workspace] = true
	}
	rep := ccapi.NodeHealthReport{Reporter: reporter, SentAt: ccapi.Stamp(now), Nodes: []ccapi.NodeHealth{}}
	for name, n := range s.nodes {
		if now.Sub(n.lastSeen) > s.lim.NodeStale {
			delete(s.nodes, name)
			continue
		}
		h := n.health
		h.ObservedAt = ccapi.Stamp(n.lastSeen)
		for ws := range perNode[name] {
			h.Workspaces = append(h.Workspaces, ws.String())
		}
		slices.Sort(h.Workspaces)
		h.WorkspaceCount = len(h.Workspaces)
		rep.Nodes = append(rep.Nodes, h)
	}
	slices.SortFunc(rep.Nodes, func(a, b ccapi.NodeHealth) int { return strings.Compare(a.Name, b.Name) })
	s.forgetStaleClaims(now)
	rep.ClusterClasses = s.classUsage()
	return rep
}

// degradingConditions are the node conditions that make a node degraded
// when True; Ready makes it degraded when anything but True.
var degradingConditions = map[corev1.NodeConditionType]bool{
	corev1.NodeMemoryPressure:     true,
	corev1.NodeDiskPressure:       true,
	corev1.NodePIDPressure:        true,
	corev1.NodeNetworkUnavailable: true,
}

// summarizeNode reduces a Node to what Cluster Control is told.
func summarizeNode(n *corev1.Node) ccapi.NodeHealth {
	h := ccapi.NodeHealth{
		Name:          n.Name,
		Health:        ccapi.HealthHealthy,
		Unschedulable: n.Spec.Unschedulable,
		Capacity:      resources(n.Status.Capacity),
		Allocatable:   resources(n.Status.Allocatable),
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
		if degradingConditions[c.Type] && c.Status == corev1.ConditionTrue {
			h.Health = ccapi.HealthDegraded
		}
		h.Conditions = append(h.Conditions, ccapi.NodeCondition{
			Type:               string(c.Type),
			Status:             string(c.Status),
			Reason:             c.Reason,
			Message:            c.Message,
			LastTransitionTime: metav1.NewTime(c.LastTransitionTime.UTC()),
		})
	}
	if !ready {
		h.Health = ccapi.HealthDegraded
	}
	slices.SortFunc(h.Conditions, func(a, b ccapi.NodeCondition) int { return strings.Compare(a.Type, b.Type) })
	for k, v := range n.Labels {
		if strings.HasPrefix(k, v1alpha1.NodeLabelPrefix) {
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[k] = v
		}
	}
	return h
}

func resources(l corev1.ResourceList) ccapi.Resources {
	var r ccapi.Resources
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.CPU = q.String()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.Memory = q.String()
	}
	return r
}
