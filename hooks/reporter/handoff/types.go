// Package handoff is the localhost protocol between the hook server and the
// reporter sidecar: the observation types, and the Client the hook server
// uses to hand them over without ever blocking a hook.
package handoff

import (
	"fmt"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Paths of the reporter's localhost API.
const (
	// PathObservations takes a POSTed Batch.
	PathObservations = "/v1/observations"
	// PathRestartDirectives is followed by "namespace/name"; a GET answers
	// a Directive, or 404 when there is none.
	PathRestartDirectives = "/v1/restart-directives/"
)

// WorkspaceLabel marks the pods that belong to a workspace; its value is the
// workspace's name, in the pod's namespace.
const WorkspaceLabel = "formspec.dev/workspace"

// Batch is the body of POST /v1/observations.
type Batch struct {
	Observations []Observation `json:"observations"`
}

// Observation is one thing the hook server saw. Exactly one field is set.
type Observation struct {
	Workspace        *WorkspaceStatus `json:"workspace,omitempty"`
	WorkspaceDeleted *WorkspaceRef    `json:"workspaceDeleted,omitempty"`
	Node             *corev1.Node     `json:"node,omitempty"`
	Pod              *PodPlacement    `json:"pod,omitempty"`
}

// WorkspaceRef names a workspace.
type WorkspaceRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// WorkspaceStatus is a workspace's status as the workspace hook computed it.
type WorkspaceStatus struct {
	Namespace          string                              `json:"namespace"`
	Name               string                              `json:"name"`
	ClusterClass       string                              `json:"clusterClass,omitempty"`
	ObservedGeneration int64                               `json:"observedGeneration,omitempty"`
	Phase              string                              `json:"phase"`
	Conditions         []metav1.Condition                  `json:"conditions,omitempty"`
	Replicas           int32                               `json:"replicas"`
	ReadyReplicas      int32                               `json:"readyReplicas"`
	UpdatedReplicas    int32                               `json:"updatedReplicas"`
	ArtifactHash       string                              `json:"artifactHash,omitempty"`
	Datastores         []v1alpha1.WorkspaceDatastoreStatus `json:"datastores,omitempty"`
}

// PodPlacement is where one workspace pod runs.
type PodPlacement struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Workspace is the pod's formspec.dev/workspace label.
	Workspace string          `json:"workspace"`
	NodeName  string          `json:"nodeName,omitempty"`
	Phase     corev1.PodPhase `json:"phase,omitempty"`
	// Terminating is true once the pod has a deletion timestamp: it no longer
	// counts towards its node's workspaces.
	Terminating bool `json:"terminating,omitempty"`
}

// Directive is the answer of GET /v1/restart-directives/{namespace}/{name}.
type Directive struct {
	ArtifactHash string `json:"artifactHash"`
}

// WorkspaceObservation builds the observation the workspace hook hands over
// after computing status for ws.
func WorkspaceObservation(ws *v1alpha1.Workspace, status *v1alpha1.WorkspaceStatus) Observation {
	return Observation{Workspace: &WorkspaceStatus{
		Namespace:          ws.Namespace,
		Name:               ws.Name,
		ClusterClass:       ws.Spec.ClusterClass,
		ObservedGeneration: status.ObservedGeneration,
		Phase:              status.Phase,
		Conditions:         status.Conditions,
		Replicas:           status.Replicas,
		ReadyReplicas:      status.ReadyReplicas,
		UpdatedReplicas:    status.UpdatedReplicas,
		ArtifactHash:       status.ArtifactHash,
		Datastores:         status.Datastores,
	}}
}

// Validate reports an observation the reporter cannot use.
func (o *Observation) Validate() error {
	set := 0
	for _, present := range []bool{o.Workspace != nil, o.WorkspaceDeleted != nil, o.Node != nil, o.Pod != nil} {
		if present {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("observation has %d kinds set, want exactly 1", set)
	}
	switch {
	case o.Workspace != nil && (o.Workspace.Namespace == "" || o.Workspace.Name == ""):
		return fmt.Errorf("workspace observation has no namespace or name")
	case o.WorkspaceDeleted != nil && (o.WorkspaceDeleted.Namespace == "" || o.WorkspaceDeleted.Name == ""):
		return fmt.Errorf("workspace deletion has no namespace or name")
	case o.Node != nil && o.Node.Name == "":
		return fmt.Errorf("node observation has no name")
	case o.Pod != nil && (o.Pod.Namespace == "" || o.Pod.Name == "" || o.Pod.Workspace == ""):
		return fmt.Errorf("pod observation has no namespace, name or workspace")
	}
	return nil
}
