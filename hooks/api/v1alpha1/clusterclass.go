package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FeatureAutoScaling is the ClusterClass feature that gives a workspace an
// HPA. It is the only feature with an effect today.
const FeatureAutoScaling = "auto-scaling"

// ClusterClass is cluster-scoped configuration shared by workspaces: scaling
// policy, node type and features. It has no status.
type ClusterClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterClassSpec `json:"spec"`
}

// ClusterClassSpec is the desired configuration of a ClusterClass.
type ClusterClassSpec struct {
	// SLA is the service level the class promises; carried, not enforced.
	SLA string `json:"sla,omitempty"`
	// NodeType selects nodes labelled formspec.dev/node-type=<NodeType>.
	NodeType string `json:"nodeType,omitempty"`
	// MaxWorkspaces is a placement input for Cluster Control (0: no limit); reported, not enforced here.
	MaxWorkspaces int32 `json:"maxWorkspaces,omitempty"`
	// Pricing is free-form and only carried.
	Pricing json.RawMessage `json:"pricing,omitempty"`
	// Scaling is the replica policy of the class's workspaces.
	Scaling Scaling `json:"scaling,omitempty"`
	// Features switch on optional behaviour; FeatureAutoScaling is the one with an effect.
	Features []string `json:"features,omitempty"`
}

// Scaling is a ClusterClass's replica policy.
type Scaling struct {
	// MinReplicas defaults to 1 when unset.
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the HPA's ceiling; never below the floor.
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// ScaleToZero lets a workspace marked idle run no pods.
	ScaleToZero bool `json:"scaleToZero,omitempty"`
	// TargetCPUUtilizationPercentage defaults to 80 when unset.
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// HasFeature reports whether the class lists feature f.
func (c *ClusterClass) HasFeature(f string) bool {
	for _, have := range c.Spec.Features {
		if have == f {
			return true
		}
	}
	return false
}
