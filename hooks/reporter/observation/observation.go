// Package observation holds the wire types of the localhost protocol
// between the hook server and the reporter sidecar: what the hooks observed,
// and the restart directive the sidecar answers with.
//
// It is types only. The hooks (hooks/workspace, hooks/observe) build
// observations and hand them to a Sink, and must stay pure functions with no
// HTTP client behind them, so this package imports neither net/http nor any
// package of this module that does; the transport is hooks/reporter/handoff
// (client) and hooks/reporter (server). k8s.io/apimachinery still links
// net/http in transitively, which is why the check is on this module's
// imports, not on `go list -deps`.
package observation

import (
	"fmt"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/clustercontrol/ccapi"
	corev1 "k8s.io/api/core/v1"
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

// WorkspaceStatus is a workspace's status as the workspace hook computed it:
// which workspace, and the part of its status Cluster Control uses. The
// status is ccapi.WorkspaceStatus itself, embedded so its fields sit flat
// beside namespace and name on the wire, so the reporter forwards exactly
// what the hook computed and the two contracts cannot drift apart.
type WorkspaceStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	ccapi.WorkspaceStatus
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
		Namespace: ws.Namespace,
		Name:      ws.Name,
		WorkspaceStatus: ccapi.WorkspaceStatus{
			ClusterClass:       ws.Spec.ClusterClass,
			ObservedGeneration: status.ObservedGeneration,
			Phase:              status.Phase,
			Conditions:         status.Conditions,
			Replicas:           status.Replicas,
			ReadyReplicas:      status.ReadyReplicas,
			UpdatedReplicas:    status.UpdatedReplicas,
			ArtifactHash:       status.ArtifactHash,
			Datastores:         status.Datastores,
		},
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
