package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FeatureAutoScaling is the ClusterClass feature that gives a workspace an
// HPA.
const FeatureAutoScaling = "auto-scaling"

// FeatureWakeOnRequest is the ClusterClass feature that routes a
// workspace's Service host through the KEDA HTTP add-on's interceptor, so
// that a request to an idle workspace is held and wakes it. It needs
// scaling.scaleToZero, and it has an effect only where the add-on and the
// wake controller are installed (the chart's wakeOnRequest.enabled).
const FeatureWakeOnRequest = "wake-on-request"

// Defaults of the wake-on-request settings of Scaling.
const (
	// DefaultWakeTimeoutSeconds is how long the interceptor holds a request
	// for a workspace that is not ready before answering 504.
	DefaultWakeTimeoutSeconds = 60
	// DefaultMaxHeldRequests is how many requests of one workspace may be
	// held while it wakes before the rest are refused with 503.
	DefaultMaxHeldRequests = 100
)

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
	// Features switch on optional behaviour: FeatureAutoScaling and
	// FeatureWakeOnRequest have an effect.
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
	// IdleAfterSeconds, with FeatureWakeOnRequest, idles a workspace the
	// interceptor has seen no request for this long; 0 or unset: never.
	IdleAfterSeconds int32 `json:"idleAfterSeconds,omitempty"`
	// WakeTimeoutSeconds, with FeatureWakeOnRequest, bounds how long a
	// request is held for a waking workspace (DefaultWakeTimeoutSeconds
	// when unset).
	WakeTimeoutSeconds *int32 `json:"wakeTimeoutSeconds,omitempty"`
	// MaxHeldRequests, with FeatureWakeOnRequest, caps the requests held
	// for a waking workspace; beyond it they are refused with 503 and
	// Retry-After (DefaultMaxHeldRequests when unset).
	MaxHeldRequests *int32 `json:"maxHeldRequests,omitempty"`
}

// WakesOnRequest reports whether the class's workspaces are woken by a
// request: the feature and scale-to-zero together.
func (c *ClusterClass) WakesOnRequest() bool {
	return c.Spec.Scaling.ScaleToZero && c.HasFeature(FeatureWakeOnRequest)
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
