package integration

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestControllerFiles checks the controller definitions for what neither
// the API server nor Metacontroller's CRD schema catches: that the
// kustomization installs every definition, and that no webhook carries a
// setting Metacontroller cannot start with.
func TestControllerFiles(t *testing.T) {
	root := controlplane.RepoRoot(t)
	dir := filepath.Join(root, "compositecontrollers")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			defs = append(defs, filepath.Base(f))
		}
	}

	t.Run("Kustomization", func(t *testing.T) {
		docs, err := controlplane.ReadYAMLFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, r := range docs[0]["resources"].([]any) {
			listed = append(listed, r.(string))
		}
		slices.Sort(listed)
		if diff := cmp.Diff(defs, listed); diff != "" {
			t.Errorf("compositecontrollers/kustomization.yaml resources: -want, +got:\n%s", diff)
		}
	})

	t.Run("ETagCache", func(t *testing.T) {
		// Metacontroller 4.17 dereferences etag.cacheCleanupSeconds
		// whenever etag.cacheTimeoutSeconds is set, and panics building the
		// hook when it is missing: the controller never starts.
		for _, f := range defs {
			objs, err := controlplane.ReadYAMLFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range objs {
				spec, _ := obj["spec"].(map[string]any)
				hooks, _ := spec["hooks"].(map[string]any)
				for _, name := range slices.Sorted(maps.Keys(hooks)) {
					hook, _ := hooks[name].(map[string]any)
					webhook, _ := hook["webhook"].(map[string]any)
					etag, _ := webhook["etag"].(map[string]any)
					_, timeout := etag["cacheTimeoutSeconds"]
					_, cleanup := etag["cacheCleanupSeconds"]
					if timeout && !cleanup {
						t.Errorf("%s: hook %s: etag.cacheTimeoutSeconds without etag.cacheCleanupSeconds makes Metacontroller panic", f, name)
					}
				}
			}
		}
	})
}
