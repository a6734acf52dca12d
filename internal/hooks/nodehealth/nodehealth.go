// Package nodehealth holds the observe-only DecoratorController hooks,
// node-health and workspace-pods: the nodes, and where workspace pods run,
// which together make the reporter's node-health reports. They decode the
// object Metacontroller sends, hand an observation to the reporter sidecar
// through a Sink, and answer with an empty response: they never change the
// cluster.
package nodehealth

import (
	"context"
	"errors"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hook is the shape of a DecoratorController sync hook (node-health's;
// workspace-pods' takes a PodsRequest).
type Hook func(ctx context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error)

// empty is the answer of both hooks. Attachments must be a non-nil list:
// it is the complete desired set, and Metacontroller decodes the response
// strictly, so "attachments": [] is the smallest valid v2 answer.
func empty(finalizing bool) *metacontroller.DecoratorResponse {
	return &metacontroller.DecoratorResponse{
		Attachments: []metacontroller.Object{},
		// Nothing is ever attached, so nothing needs tearing down; this only
		// matters if someone adds a finalize hook pointing here.
		Finalized: finalizing,
	}
}

// invalid reports a request no observation can be made from. It is an
// *metacontroller.InvalidObjectError, so the transport answers 400: the
// request is at fault, not the hook.
func invalid(what string, err error) error {
	return &metacontroller.InvalidObjectError{What: what, Err: err}
}

// NodeHealth returns the node-health hook: it hands every Node it is shown
// to sink.
func NodeHealth(sink observation.Sink) Hook {
	sink = observation.OrDiscard(sink)
	return func(ctx context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
		if err := req.Validate(); err != nil {
			return nil, invalid("request", err)
		}
		var node corev1.Node
		if err := metacontroller.Decode(req.Object, &node, "Node"); err != nil {
			return nil, err
		}
		if node.Name == "" {
			return nil, invalid("Node", errors.New("the object has no name"))
		}
		// The image list and managed fields are the bulk of a Node and the
		// reporter uses neither; shedding them keeps the hand-off queue small.
		node.Status.Images = nil
		node.ManagedFields = nil
		node.Annotations = nil
		// A node on its way out is left to age out in the reporter rather
		// than reported once more in a last, stale state.
		if !req.Finalizing && node.DeletionTimestamp == nil {
			sink.Send(observation.Observation{Node: &node})
		}
		return empty(req.Finalizing), nil
	}
}

// PodsRequest is the workspace-pods hook's request: a DecoratorRequest
// decoded in one pass, its object straight into the few fields the hook
// reads. A DecoratorRequest would copy the Pod's bytes whole, for the hook
// to read them a second time; this is the hook called most.
type PodsRequest struct {
	// Object is the Pod; nil when the request has none.
	Object      *podView                 `json:"object"`
	Attachments metacontroller.ObjectMap `json:"attachments"`
	Related     metacontroller.ObjectMap `json:"related"`
	Finalizing  bool                     `json:"finalizing"`
}

// Validate reports a request that cannot be served: no Pod.
func (r *PodsRequest) Validate() error {
	if r.Object == nil {
		return errors.New("request has no object")
	}
	return nil
}

// ObjectCount is how many objects the request carries besides its Pod
// (see metacontroller.CompositeRequest.ObjectCount).
func (r *PodsRequest) ObjectCount() int { return r.Attachments.Count() + r.Related.Count() }

// WorkspacePods returns the workspace-pods hook: it hands the placement of
// every workspace pod it is shown to sink.
func WorkspacePods(sink observation.Sink) func(context.Context, *PodsRequest) (*metacontroller.DecoratorResponse, error) {
	sink = observation.OrDiscard(sink)
	return func(ctx context.Context, req *PodsRequest) (*metacontroller.DecoratorResponse, error) {
		if err := req.Validate(); err != nil {
			return nil, invalid("request", err)
		}
		pod := req.Object
		ws := pod.Metadata.Labels[v1alpha1.LabelWorkspace]
		if pod.Metadata.Namespace == "" || pod.Metadata.Name == "" || ws == "" {
			// The controller's selector should make this impossible; a pod
			// without the label is simply not ours to report.
			return empty(req.Finalizing), nil
		}
		sink.Send(observation.Observation{Pod: &observation.PodPlacement{
			Namespace:   pod.Metadata.Namespace,
			Name:        pod.Metadata.Name,
			Workspace:   ws,
			NodeName:    pod.Spec.NodeName,
			Phase:       pod.Status.Phase,
			Terminating: pod.Metadata.DeletionTimestamp != nil || req.Finalizing,
		}})
		return empty(req.Finalizing), nil
	}
}

// podView is all of a Pod the workspace-pods hook reads. It is the hook
// called most (every workspace pod at each resync of its controller), and
// decoding a whole corev1.Pod, its containers, statuses and managed fields,
// took more than half of the hook's time for fields nothing reads
// (BenchmarkWorkspacePods).
type podView struct {
	Metadata struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		Phase corev1.PodPhase `json:"phase"`
	} `json:"status"`
}
