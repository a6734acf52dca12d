package workspace

import (
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// scaling is the replica policy that follows from a workspace and its class.
type scaling struct {
	// idle is true when the workspace asks to sleep and its class allows it.
	idle bool
	// min is the class's floor, never below one while awake.
	min int32
	// max is the HPA's ceiling (at least min).
	max int32
	// hpa is true when an HPA should own the replica count.
	hpa bool
	// targetCPU is the HPA's CPU utilization target in percent.
	targetCPU int32
	// replicas is the value to write into the Deployment.
	replicas int32
}

// scalingFor decides the replica count and whether an HPA owns it.
// observed is the Deployment's current spec.replicas, nil when no
// Deployment is observed.
func scalingFor(ws *v1alpha1.Workspace, class *v1alpha1.ClusterClass, observed *int32) scaling {
	s := class.Spec.Scaling
	out := scaling{min: 1, targetCPU: 80}
	if s.MinReplicas != nil && *s.MinReplicas > out.min {
		out.min = *s.MinReplicas
	}
	out.max = out.min
	if s.MaxReplicas != nil && *s.MaxReplicas > out.max {
		out.max = *s.MaxReplicas
	}
	if s.TargetCPUUtilizationPercentage != nil {
		out.targetCPU = *s.TargetCPUUtilizationPercentage
	}
	out.idle = s.ScaleToZero && ws.Annotations[v1alpha1.AnnotationIdle] == "true"
	out.hpa = class.HasFeature(v1alpha1.FeatureAutoScaling) && !out.idle

	switch {
	case out.idle:
		out.replicas = 0
	case out.hpa:
		// The HPA owns the number, but the field must still be sent:
		// Metacontroller's apply is a three-way merge against what it last
		// applied, and a field that disappears from the desired object is
		// reset to the API default of one. Sending back what is running
		// (kept within the HPA's bounds) is a no-op for that merge and
		// leaves the HPA's later changes alone.
		out.replicas = out.min
		if observed != nil {
			out.replicas = min(max(*observed, out.min), out.max)
		}
	default:
		out.replicas = out.min
	}
	return out
}
