package datastore

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/controllercheck"
)

func TestController(t *testing.T) {
	dc := controllercheck.Decorator(t, "../../../compositecontrollers/datastore.yaml", controllercheck.HookPaths{
		"customize": "/v1/datastore/customize",
		"sync":      "/v1/datastore/sync",
	})
	spec := dc["spec"].(map[string]any)
	if diff := cmp.Diff([]any{map[string]any{"apiVersion": "formspec.dev/v1alpha1", "resource": "datastores", "ignoreStatusChanges": true}}, spec["resources"]); diff != "" {
		t.Errorf("resources: -want, +got:\n%s", diff)
	}
	if _, ok := spec["attachments"]; ok {
		t.Errorf("the datastore controller is status only, but has attachments")
	}
}
