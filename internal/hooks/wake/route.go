package wake

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The KEDA HTTP add-on's routing object, as its interceptor reads it
// (http.keda.sh/v1beta1 InterceptorRoute, add-on v0.15). The add-on's Go
// module would bring controller-runtime, OpenTelemetry and KEDA itself into
// this module for a handful of fields, so the fields this hook sets are
// mirrored here, with the add-on's JSON names; test/node applies what the
// hook renders to an API server serving the add-on's own CRD.
const (
	RouteGroup      = "http.keda.sh"
	RouteAPIVersion = RouteGroup + "/v1beta1"
	RouteKind       = "InterceptorRoute"
	// RouteResource is the plural the DecoratorController attaches.
	RouteResource = "interceptorroutes"
)

// Route is an InterceptorRoute.
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RouteSpec `json:"spec"`
}

// RouteSpec is the part of InterceptorRouteSpec this hook sets.
type RouteSpec struct {
	// Target is the Service the interceptor forwards to once it has a
	// ready endpoint.
	Target RouteTarget `json:"target"`
	// ColdStart, while set, answers requests with a static response as long
	// as the target has no ready endpoint instead of holding them.
	ColdStart *ColdStart `json:"coldStart,omitempty"`
	// Timeouts bound how long a request is held.
	Timeouts RouteTimeouts `json:"timeouts,omitzero"`
	// Rules match requests by host.
	Rules []RoutingRule `json:"rules,omitempty"`
	// ScalingMetric is required by the CRD. Nothing here reads it: the
	// workspace is woken by the reporter, not by KEDA's scaler.
	ScalingMetric ScalingMetric `json:"scalingMetric"`
}

// RouteTarget names a Service port by name.
type RouteTarget struct {
	Service  string `json:"service"`
	PortName string `json:"portName"`
}

// ColdStart is the add-on's ColdStartSpec, placeholder only.
type ColdStart struct {
	Placeholder *Placeholder `json:"placeholder"`
}

// Placeholder is the add-on's ColdStartPlaceholder.
type Placeholder struct {
	Response StaticResponse `json:"response"`
}

// StaticResponse is the add-on's StaticResponse, with an inline body.
type StaticResponse struct {
	StatusCode int32             `json:"statusCode"`
	Body       string            `json:"body,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
}

// RouteTimeouts is the add-on's InterceptorRouteTimeouts, readiness only.
type RouteTimeouts struct {
	// Readiness is how long a request waits for a ready endpoint before
	// the interceptor answers 504.
	Readiness *metav1.Duration `json:"readiness,omitempty"`
}

// RoutingRule matches requests by host.
type RoutingRule struct {
	Hosts []string `json:"hosts"`
}

// ScalingMetric is the add-on's ScalingMetricSpec, concurrency only.
type ScalingMetric struct {
	Concurrency *ConcurrencyTarget `json:"concurrency"`
}

// ConcurrencyTarget is the add-on's ConcurrencyTargetSpec.
type ConcurrencyTarget struct {
	TargetValue int32 `json:"targetValue"`
}
