package wake

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/controllercheck"
)

func TestController(t *testing.T) {
	dc := controllercheck.Decorator(t, "../../../compositecontrollers/wake-on-request/wake.yaml", controllercheck.HookPaths{
		"customize": "/v1/wake/customize",
		"sync":      "/v1/wake/sync",
	})
	spec := dc["spec"].(map[string]any)
	if diff := cmp.Diff([]any{map[string]any{"apiVersion": "formspec.dev/v1alpha1", "resource": "workspaces", "ignoreStatusChanges": true}}, spec["resources"]); diff != "" {
		t.Errorf("resources: -want, +got:\n%s", diff)
	}
	want := []any{map[string]any{"apiVersion": RouteAPIVersion, "resource": RouteResource, "updateStrategy": map[string]any{"method": "InPlace"}}}
	if diff := cmp.Diff(want, spec["attachments"]); diff != "" {
		t.Errorf("attachments: -want, +got:\n%s", diff)
	}
}
