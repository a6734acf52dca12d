// Package wake implements the hooks of the optional wake DecoratorController
// (compositecontrollers/wake-on-request): for a Workspace whose
// ClusterClass has the wake-on-request feature and scale-to-zero, it
// attaches one KEDA HTTP add-on InterceptorRoute, named after the
// workspace, that sends the workspace's Service host names to its Service.
// The interceptor holds a request while the workspace has no ready pod; the
// reporter sidecar sees it pending and wakes the workspace
// (internal/reporter/wake).
//
// It is a controller of its own, not part of the workspace
// CompositeController, because Metacontroller cannot start a controller
// whose child kind has no CRD, and the InterceptorRoute CRD exists only
// where the add-on is installed.
package wake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// ClusterDomain is the cluster DNS domain in the longest host name a route
// matches, <workspace>.<namespace>.svc.<ClusterDomain>.
const ClusterDomain = "cluster.local"

// RetryAfterSeconds is the Retry-After of the 503 a request gets once a
// waking workspace holds as many requests as its class allows: about one
// cold start of a small workspace.
const RetryAfterSeconds = 5

// overflowBody is the body of that 503.
const overflowBody = "the workspace is starting and already holds as many requests as it may; retry after a few seconds\n"

// concurrencyTarget fills the CRD's required scaling metric. Only KEDA's
// scaler would read it, and this install runs none.
const concurrencyTarget = 100

// Managed-by label of the route, beside v1alpha1.LabelWorkspace.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "formspec-hooks"
)

// MaxAttachedRoutes bounds the observed InterceptorRoutes of one request:
// the hook attaches one.
const MaxAttachedRoutes = 1

// MaxRelatedClasses bounds the related ClusterClasses: the customize asks
// for one, by name.
const MaxRelatedClasses = 1

// routeKey is the attachments key of the InterceptorRoutes.
var routeKey = metacontroller.Key(RouteAPIVersion, RouteKind)

// classKey is the related key of the ClusterClasses.
var classKey = metacontroller.Key(v1alpha1.APIVersion, "ClusterClass")

// Hook serves the wake DecoratorController. It keeps no state.
type Hook struct{}

// New returns a Hook.
func New() *Hook { return &Hook{} }

// workspace is what the hook reads of a Workspace: its name, the overflow
// annotation and its class. The rest of its spec is the workspace hook's
// to judge, so a spec this hook does not need never fails it.
type workspace struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec codec.RawMessage `json:"spec"`
}

func decodeWorkspace(raw codec.RawMessage) (*workspace, string, error) {
	ws := &workspace{}
	if err := metacontroller.Decode(raw, ws, "Workspace"); err != nil {
		return nil, "", err
	}
	if ws.Metadata.Name == "" || ws.Metadata.Namespace == "" {
		return nil, "", &metacontroller.InvalidObjectError{What: "Workspace", Err: fmt.Errorf("no name or namespace")}
	}
	var spec struct {
		ClusterClass string `json:"clusterClass"`
	}
	// A spec that does not decode names no class: the workspace hook
	// reports it as InvalidSpec.
	if len(ws.Spec) > 0 && codec.Unmarshal(ws.Spec, &spec) != nil {
		spec.ClusterClass = ""
	}
	return ws, spec.ClusterClass, nil
}

// Customize asks for the workspace's ClusterClass, by name.
func (h *Hook) Customize(_ context.Context, req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	_, class, err := decodeWorkspace(req.Parent)
	if err != nil {
		return nil, err
	}
	resp := &metacontroller.CustomizeResponse{RelatedResources: []metacontroller.RelatedResourceRule{}}
	if class != "" {
		resp.RelatedResources = append(resp.RelatedResources, metacontroller.RelatedResourceRule{
			APIVersion: v1alpha1.APIVersion, Resource: "clusterclasses", Names: []string{class},
		})
	}
	return resp, nil
}

// Sync answers with the workspace's InterceptorRoute while its class wakes
// on request, and with none otherwise (Metacontroller then deletes the one
// attached before). While the class is missing, the observed route is
// kept as it is, as the workspace hook keeps its children. It never
// touches the workspace's status or metadata.
func (h *Hook) Sync(_ context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
	if err := metacontroller.Limit("related ClusterClasses", len(req.Related[classKey]), MaxRelatedClasses); err != nil {
		return nil, err
	}
	if err := metacontroller.Limit("attached InterceptorRoutes", len(req.Attachments[routeKey]), MaxAttachedRoutes); err != nil {
		return nil, err
	}
	ws, className, err := decodeWorkspace(req.Object)
	if err != nil {
		return nil, err
	}
	resp := &metacontroller.DecoratorResponse{Attachments: []metacontroller.Object{}}
	var class *v1alpha1.ClusterClass
	if className != "" {
		if class, err = metacontroller.Get[v1alpha1.ClusterClass](req.Related, classKey, className); err != nil {
			return nil, err
		}
	}
	if class == nil {
		if className == "" {
			return resp, nil
		}
		kept, err := observedRoutes(req.Attachments)
		if err != nil {
			return nil, err
		}
		resp.Attachments = kept
		return resp, nil
	}
	if !class.WakesOnRequest() {
		return resp, nil
	}
	obj, err := metacontroller.ToObject(route(ws, class))
	if err != nil {
		return nil, err
	}
	resp.Attachments = append(resp.Attachments, obj)
	return resp, nil
}

// Hosts are the host names a workspace's route matches: its Service's
// names, short to fully qualified.
func Hosts(name, namespace string) []string {
	svc := name + "." + namespace
	return []string{svc, svc + ".svc", svc + ".svc." + ClusterDomain}
}

// route is the InterceptorRoute of a workspace whose class wakes on
// request.
func route(ws *workspace, class *v1alpha1.ClusterClass) *Route {
	name, ns := ws.Metadata.Name, ws.Metadata.Namespace
	timeout := int64(ptr.Deref(class.Spec.Scaling.WakeTimeoutSeconds, v1alpha1.DefaultWakeTimeoutSeconds))
	r := &Route{
		TypeMeta: metav1.TypeMeta{APIVersion: RouteAPIVersion, Kind: RouteKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			Labels:    map[string]string{v1alpha1.LabelWorkspace: name, LabelManagedBy: ManagedBy},
		},
		Spec: RouteSpec{
			Target: RouteTarget{Service: name, PortName: "http"},
			// The wake timeout: past it a held request gets a 504 from the
			// interceptor, whatever the client is willing to wait.
			Timeouts:      RouteTimeouts{Readiness: &metav1.Duration{Duration: time.Duration(timeout) * time.Second}},
			Rules:         []RoutingRule{{Hosts: Hosts(name, ns)}},
			ScalingMetric: ScalingMetric{Concurrency: &ConcurrencyTarget{TargetValue: concurrencyTarget}},
		},
	}
	// The cap on held requests: the interceptor of add-on v0.15 has none
	// of its own, so once the reporter sees the cap reached it annotates
	// the workspace, and until the workspace is ready the interceptor
	// answers further requests at once with this placeholder instead of
	// holding them. Requests already held stay held.
	if ws.Metadata.Annotations[v1alpha1.AnnotationWakeOverflow] == "true" {
		r.Spec.ColdStart = &ColdStart{Placeholder: &Placeholder{Response: StaticResponse{
			StatusCode: 503,
			Body:       overflowBody,
			Headers:    map[string]string{"Retry-After": strconv.Itoa(RetryAfterSeconds), "Content-Type": "text/plain; charset=utf-8"},
		}}}
	}
	return r
}

// observedRoutes re-emits the attached routes as they are, for a workspace
// whose class is missing: their identity and spec, nothing the API server
// or Metacontroller added.
func observedRoutes(attachments metacontroller.ObjectMap) ([]metacontroller.Object, error) {
	out := []metacontroller.Object{}
	for _, key := range slices.Sorted(maps.Keys(attachments[routeKey])) {
		var observed struct {
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels,omitempty"`
			} `json:"metadata"`
			Spec codec.RawMessage `json:"spec"`
		}
		if err := metacontroller.Decode(attachments[routeKey][key], &observed, routeKey+" "+key); err != nil {
			return nil, err
		}
		meta := map[string]any{"name": observed.Metadata.Name, "namespace": observed.Metadata.Namespace}
		if len(observed.Metadata.Labels) > 0 {
			meta["labels"] = observed.Metadata.Labels
		}
		out = append(out, metacontroller.Object{
			"apiVersion": RouteAPIVersion, "kind": RouteKind, "metadata": meta, "spec": observed.Spec,
		})
	}
	return out, nil
}
