package resourceclaim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/controllercheck"
)

func TestController(t *testing.T) {
	dc := controllercheck.Decorator(t, "../../../compositecontrollers/resourceclaim.yaml", controllercheck.HookPaths{
		"customize": "/v1/resourceclaim/customize",
		"sync":      "/v1/resourceclaim/sync",
	})
	spec := dc["spec"].(map[string]any)
	if diff := cmp.Diff([]any{map[string]any{"apiVersion": "formspec.dev/v1alpha1", "resource": "resourceclaims", "ignoreStatusChanges": true}}, spec["resources"]); diff != "" {
		t.Errorf("resources: -want, +got:\n%s", diff)
	}
	want := []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}}
	if diff := cmp.Diff(want, spec["attachments"]); diff != "" {
		t.Errorf("attachments: -want, +got:\n%s", diff)
	}
}
