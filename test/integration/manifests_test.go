package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testManifests server-side dry-run applies every YAML file under
// compositecontrollers/ and deploy/ (Metacontroller's CRDs are installed),
// after creating the namespaces the objects name. The directories may be
// partial: whatever is there must apply. deploy/tls holds cert-manager
// objects; stand-ins for cert-manager's CRDs (controlplane.CertManagerCRDs)
// check their kinds and the fields this repository sets, not everything
// cert-manager itself would.
func testManifests(t *testing.T, c *controlplane.Client) {
	root := controlplane.RepoRoot(t)
	if err := c.InstallCRDs(controlplane.CertManagerCRDs(t)); err != nil {
		t.Fatalf("cannot install the cert-manager stand-in CRDs: %v", err)
	}
	files := manifestFiles(t, root, "compositecontrollers", "deploy")
	if len(files) == 0 {
		t.Log("no manifests under compositecontrollers/ or deploy/")
	}
	for _, f := range files {
		objs, err := controlplane.ReadYAMLFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			md, _ := obj["metadata"].(map[string]any)
			if ns, _ := md["namespace"].(string); ns != "" {
				ensureNamespace(t, c, ns)
			}
		}
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			if _, err := c.ApplyYAMLFile(f, fieldManager, true); err != nil {
				t.Errorf("%s does not apply: %v", rel, err)
			}
		})
	}
}

// manifestFiles lists the Kubernetes object files under dirs: *.yaml and
// *.yml, except kustomization files, the patches they reference (partial
// objects), and Helm charts (templates are not YAML until rendered;
// test/helm renders deploy/helm/formspec-hooks and applies the result).
func manifestFiles(t *testing.T, root string, dirs ...string) []string {
	t.Helper()
	var files []string
	skip := map[string]bool{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && path == filepath.Join(root, d) {
					return fs.SkipDir
				}
				return err
			}
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err == nil {
					return fs.SkipDir
				}
				return nil
			}
			name := e.Name()
			switch {
			case name == "kustomization.yaml" || name == "kustomization.yml" || name == "Kustomization":
				for _, p := range kustomizePatches(t, path) {
					skip[filepath.Join(filepath.Dir(path), p)] = true
				}
			case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("cannot list %s: %v", d, err)
		}
	}
	var out []string
	for _, f := range files {
		if !skip[filepath.Clean(f)] {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// kustomizePatches returns the patch files a kustomization references.
func kustomizePatches(t *testing.T, path string) []string {
	t.Helper()
	docs, err := controlplane.ReadYAMLFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var patches []string
	for _, k := range docs {
		for _, key := range []string{"patches", "patchesJson6902", "patchesStrategicMerge"} {
			list, _ := k[key].([]any)
			for _, p := range list {
				switch p := p.(type) {
				case string:
					patches = append(patches, p)
				case map[string]any:
					if s, ok := p["path"].(string); ok {
						patches = append(patches, s)
					}
				}
			}
		}
	}
	return patches
}
