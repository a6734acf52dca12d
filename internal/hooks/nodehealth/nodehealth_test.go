package nodehealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/testkit/recorder"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hookCall runs one of the hooks on req as the transport would.
type hookCall func(observation.Sink, metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error)

func nodes(s observation.Sink, req metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
	return NodeHealth(s)(context.Background(), &req)
}

// errBody is a body the transport cannot decode into the hook's request
// type: it answers 400 before the hook runs.
var errBody = errors.New("undecodable body")

// pods encodes req and decodes it into the hook's own request type, as
// the transport does with a body.
func pods(s observation.Sink, req metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var pr PodsRequest
	if err := codec.Unmarshal(body, &pr); err != nil {
		return nil, fmt.Errorf("%w: %w", errBody, err)
	}
	return WorkspacePods(s)(context.Background(), &pr)
}

func TestHooks(t *testing.T) {
	node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"pool-a-1","labels":{"formspec.dev/node-type":"standard"},"annotations":{"a":"b"},"managedFields":[{"manager":"kubelet"}]},
	  "spec":{"unschedulable":true},"status":{"images":[{"names":["busybox"],"sizeBytes":1}],"conditions":[{"type":"Ready","status":"True"}]}}`
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"shop-abc","namespace":"team-a","labels":{"formspec.dev/workspace":"shop"}},
	  "spec":{"nodeName":"pool-a-1"},"status":{"phase":"Running"}}`
	cases := map[string]struct {
		reason   string
		hook     hookCall
		req      metacontroller.DecoratorRequest
		wantBody string
		wantObs  []observation.Observation
		wantErr  error
	}{
		"Node": {
			reason:   "a node is handed over without its image list, managed fields or annotations",
			hook:     nodes,
			req:      metacontroller.DecoratorRequest{Object: json.RawMessage(node)},
			wantBody: `{"attachments":[]}`,
			wantObs: []observation.Observation{{Node: &corev1.Node{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
				ObjectMeta: metav1.ObjectMeta{Name: "pool-a-1", Labels: map[string]string{"formspec.dev/node-type": "standard"}},
				Spec:       corev1.NodeSpec{Unschedulable: true},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
			}}},
		},
		"NodeFinalizing": {
			reason:   "a finalize call is acknowledged and nothing is reported",
			hook:     nodes,
			req:      metacontroller.DecoratorRequest{Object: json.RawMessage(node), Finalizing: true},
			wantBody: `{"attachments":[],"finalized":true}`,
		},
		"Pod": {
			reason:   "a workspace pod's placement is handed over",
			hook:     pods,
			req:      metacontroller.DecoratorRequest{Object: json.RawMessage(pod)},
			wantBody: `{"attachments":[]}`,
			wantObs: []observation.Observation{{Pod: &observation.PodPlacement{
				Namespace: "team-a", Name: "shop-abc", Workspace: "shop", NodeName: "pool-a-1", Phase: corev1.PodRunning,
			}}},
		},
		"PodWhole": {
			reason: "a pod as Metacontroller sends it, containers, statuses and managed fields included, gives the same placement; a deleted one is terminating",
			hook:   pods,
			req: metacontroller.DecoratorRequest{Object: json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"shop-abc","namespace":"team-a",
			  "deletionTimestamp":"2026-12-01T10:00:00Z","labels":{"formspec.dev/workspace":"shop","pod-template-hash":"5d8f"},
			  "managedFields":[{"manager":"kubelet","fieldsV1":{"f:status":{}}}],"ownerReferences":[{"kind":"ReplicaSet","name":"shop-5d8f","uid":"u"}]},
			  "spec":{"nodeName":"pool-a-1","containers":[{"name":"resource","image":"formahub/formspec-resource:1.8.2","resources":{"requests":{"cpu":"250m"}}}]},
			  "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],"containerStatuses":[{"name":"resource","ready":true,"restartCount":2}]}}`)},
			wantBody: `{"attachments":[]}`,
			wantObs: []observation.Observation{{Pod: &observation.PodPlacement{
				Namespace: "team-a", Name: "shop-abc", Workspace: "shop", NodeName: "pool-a-1", Phase: corev1.PodRunning, Terminating: true,
			}}},
		},
		"PodUndecodable": {
			reason:  "a pod whose metadata is not an object is an error",
			hook:    pods,
			req:     metacontroller.DecoratorRequest{Object: json.RawMessage(`{"metadata":"nope"}`)},
			wantErr: errBody,
		},
		"PodWithoutLabel": {
			reason:   "a pod without the workspace label is ignored, not an error",
			hook:     pods,
			req:      metacontroller.DecoratorRequest{Object: json.RawMessage(`{"metadata":{"name":"x","namespace":"y"}}`)},
			wantBody: `{"attachments":[]}`,
		},
		"Undecodable": {
			reason:  "an object that is not a Node is an error",
			hook:    nodes,
			req:     metacontroller.DecoratorRequest{Object: json.RawMessage(`{"metadata":"nope"}`)},
			wantErr: &metacontroller.InvalidObjectError{What: "Node"},
		},
		"NoObject": {
			reason:  "a request without an object is an error",
			hook:    pods,
			req:     metacontroller.DecoratorRequest{},
			wantErr: &metacontroller.InvalidObjectError{What: "request"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &recorder.Sink{}
			resp, err := tc.hook(s, tc.req)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nerror (-want, +got):\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			body, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantBody, string(body)); diff != "" {
				t.Errorf("%s\nresponse (-want, +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantObs, s.Sent); diff != "" {
				t.Errorf("%s\nobservations (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}
