package wake_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/wake"
)

// TestSync pins what each decision attaches: the number of routes, the
// wake timeout the interceptor holds a request for, and whether further
// requests are refused with 503.
func TestSync(t *testing.T) {
	type got struct {
		Routes     int
		Readiness  string
		Refuses503 bool
		Status     bool
	}
	cases := map[string]struct {
		reason string
		req    *metacontroller.DecoratorRequest
		want   got
	}{
		"WakesOnRequest": {
			reason: "The feature with scale-to-zero attaches one route holding requests for the class's timeout.",
			req:    syncRequest(t, testWorkspace(nil), testClass(nil)),
			want:   got{Routes: 1, Readiness: "30s"},
		},
		"DefaultTimeout": {
			reason: "Without wakeTimeoutSeconds a request is held for the default.",
			req:    syncRequest(t, testWorkspace(nil), testClass(func(c *v1alpha1.ClusterClass) { c.Spec.Scaling.WakeTimeoutSeconds = nil })),
			want:   got{Routes: 1, Readiness: "1m0s"},
		},
		"Overflow": {
			reason: "The reporter's overflow annotation makes the interceptor refuse instead of hold.",
			req:    syncRequest(t, testWorkspace(map[string]string{v1alpha1.AnnotationWakeOverflow: "true"}), testClass(nil)),
			want:   got{Routes: 1, Readiness: "30s", Refuses503: true},
		},
		"OverflowNotTrue": {
			reason: "Only the value true refuses.",
			req:    syncRequest(t, testWorkspace(map[string]string{v1alpha1.AnnotationWakeOverflow: "yes"}), testClass(nil)),
			want:   got{Routes: 1, Readiness: "30s"},
		},
		"NoScaleToZero": {
			reason: "Without scale-to-zero nothing is ever idle, so nothing is routed through the interceptor.",
			req:    syncRequest(t, testWorkspace(nil), testClass(func(c *v1alpha1.ClusterClass) { c.Spec.Scaling.ScaleToZero = false }), observedRoute()),
			want:   got{},
		},
		"FeatureOff": {
			reason: "A class without the feature removes the route.",
			req:    syncRequest(t, testWorkspace(nil), testClass(func(c *v1alpha1.ClusterClass) { c.Spec.Features = []string{"auto-scaling"} }), observedRoute()),
			want:   got{},
		},
		"ClassMissing": {
			reason: "A missing class keeps the observed route, as it was.",
			req:    syncRequest(t, testWorkspace(nil), nil, observedRoute()),
			want:   got{Routes: 1, Readiness: "30s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := wake.New().Sync(context.Background(), tc.req)
			if err != nil {
				t.Fatalf("%s\nSync: %v", tc.reason, err)
			}
			g := got{Routes: len(resp.Attachments), Status: resp.Status != nil || resp.Labels != nil || resp.Annotations != nil}
			for _, a := range resp.Attachments {
				r := decodeRoute(t, a)
				g.Readiness = r.Spec.Timeouts.Readiness.Duration.String()
				g.Refuses503 = r.Spec.ColdStart != nil && r.Spec.ColdStart.Placeholder.Response.StatusCode == 503 &&
					r.Spec.ColdStart.Placeholder.Response.Headers["Retry-After"] != ""
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// decodeRoute reads a rendered or kept route back into its type.
func decodeRoute(t *testing.T, obj metacontroller.Object) *wake.Route {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	r := &wake.Route{}
	if err := json.Unmarshal(b, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSyncLimits shows that a request with more related classes or
// attached routes than the hook serves is refused as too large, before it
// is decoded.
func TestSyncLimits(t *testing.T) {
	twoClasses := syncRequest(t, testWorkspace(nil), testClass(nil))
	twoClasses.Related[metacontroller.Key(v1alpha1.APIVersion, "ClusterClass")]["other"] = []byte(`{}`)
	twoRoutes := syncRequest(t, testWorkspace(nil), testClass(nil), observedRoute())
	twoRoutes.Attachments[metacontroller.Key(wake.RouteAPIVersion, wake.RouteKind)]["tenant-acme/other"] = []byte(`{}`)
	cases := map[string]struct {
		reason string
		req    *metacontroller.DecoratorRequest
		want   error
	}{
		"Classes": {reason: "The customize asks for one class.", req: twoClasses, want: &metacontroller.LimitError{What: "related ClusterClasses", Limit: wake.MaxRelatedClasses}},
		"Routes":  {reason: "The hook attaches one route.", req: twoRoutes, want: &metacontroller.LimitError{What: "attached InterceptorRoutes", Limit: wake.MaxAttachedRoutes}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := wake.New().Sync(context.Background(), tc.req)
			var got *metacontroller.LimitError
			if !errors.As(err, &got) {
				t.Fatalf("%s\nSync: %v, want a LimitError", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
