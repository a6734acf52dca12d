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
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hook is the shape of a DecoratorController sync hook.
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

// WorkspacePods returns the workspace-pods hook: it hands the placement of
// every workspace pod it is shown to sink.
func WorkspacePods(sink observation.Sink) Hook {
	sink = observation.OrDiscard(sink)
	return func(ctx context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
		if err := req.Validate(); err != nil {
			return nil, invalid("request", err)
		}
		var pod podView
		if err := metacontroller.Decode(req.Object, &pod, "Pod"); err != nil {
			return nil, err
		}
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
