package state

import (
	"fmt"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// digest is the n-th well-formed artifact hash: "sha256:" and 64 hex
// digits, as the reporter requires of a restart.
func digest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

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

func wsStatus(name, phase, hash string) *observation.WorkspaceStatus {
	return &observation.WorkspaceStatus{Namespace: "ns", Name: name, Phase: phase, ArtifactHash: hash}
}
