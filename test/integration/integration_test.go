// Package integration tests this repository's YAML against a real
// kube-apiserver: the CRDs' schemas, defaults and CEL rules, the controller
// definitions and install manifests, and every child object the fixtures say
// a hook returns. The control plane comes from test/controlplane; without
// its binaries (FORMSPEC_K8S_BIN) the API server tests skip, while the
// static checks of the CRD files still run.
package integration

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// fieldManager is the server-side apply field manager of every test write.
const fieldManager = "formspec-integration-test"

// TestAPIServer runs every API server check against one control plane:
// starting one takes seconds, each check milliseconds. The formspec.dev
// CRDs and Metacontroller's are installed first, as in a real cluster: the
// manifests and fixtures use them, and short names must not collide.
func TestAPIServer(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	if err := c.InstallCRDs(crdFiles(t)...); err != nil {
		t.Fatalf("cannot install deploy/crds: %v", err)
	}
	mc := controlplane.MetacontrollerCRDs(t)
	if err := c.InstallCRDs(mc); err != nil {
		t.Fatalf("cannot install Metacontroller CRDs from %s: %v", mc, err)
	}

	t.Run("ShortNames", func(t *testing.T) { testShortNames(t, c) })
	t.Run("KubectlNames", func(t *testing.T) { testKubectlNames(t, c) })
	t.Run("PrinterColumns", func(t *testing.T) { testPrinterColumns(t, c) })
	t.Run("ClusterClass", func(t *testing.T) { testClusterClass(t, c) })
	t.Run("Workspace", func(t *testing.T) { testWorkspace(t, c) })
	t.Run("WorkspacePod", func(t *testing.T) { testWorkspacePod(t, c) })
	t.Run("FixtureWorkspaces", func(t *testing.T) { testFixtureWorkspaces(t, c) })
	t.Run("RestrictedPodSecurity", func(t *testing.T) { testRestrictedPodSecurity(t, c) })
	t.Run("Datastore", func(t *testing.T) { testDatastore(t, c) })
	t.Run("ResourceClaim", func(t *testing.T) { testResourceClaim(t, c) })
	t.Run("Status", func(t *testing.T) { testStatus(t, c) })
	t.Run("Manifests", func(t *testing.T) { testManifests(t, c) })
	// The wake controller's routes are checked against the KEDA HTTP
	// add-on's own CRDs, from the module cache.
	keda, err := controlplane.KEDAHTTPCRDs(t)
	if err != nil {
		t.Fatalf("cannot check the wake fixtures' routes: %v", err)
	}
	if err := c.InstallCRDs(keda...); err != nil {
		t.Fatalf("cannot install the KEDA HTTP add-on's CRDs: %v", err)
	}
	t.Run("FixtureChildren", func(t *testing.T) { testFixtureChildren(t, c) })
}

// crdFiles lists deploy/crds/*.yaml except the kustomization.
func crdFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(controlplane.RepoRoot(t), "deploy", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crds []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			crds = append(crds, f)
		}
	}
	if len(crds) == 0 {
		t.Fatal("no CRDs in deploy/crds")
	}
	return crds
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(t testing.TB, c *controlplane.Client, name string) {
	t.Helper()
	createIfAbsent(t, c, controlplane.Object{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	})
}

// createIfAbsent creates obj unless it exists.
func createIfAbsent(t testing.TB, c *controlplane.Client, obj controlplane.Object) {
	t.Helper()
	_, err := c.Create(obj)
	var apiErr *controlplane.APIError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict) {
		t.Fatalf("cannot create %v %v: %v", obj["kind"], obj["metadata"], err)
	}
}

// remove, as a value in fields, deletes the field.
type remove struct{}

// fields are changes to an object by dotted path, e.g. "spec.scaling.minReplicas".
type fields map[string]any

// with returns a deep copy of obj (as JSON would decode it) with the
// changes applied.
func with(t testing.TB, obj controlplane.Object, changes fields) controlplane.Object {
	t.Helper()
	out := jsonCopy(t, obj).(map[string]any)
	for path, v := range changes {
		keys := strings.Split(path, ".")
		m := out
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		last := keys[len(keys)-1]
		if _, ok := v.(remove); ok {
			delete(m, last)
			continue
		}
		m[last] = jsonCopy(t, v)
	}
	return out
}

// jsonCopy returns v as encoding/json would decode its encoding, so that
// it compares equal to what the API server returns (numbers as float64).
func jsonCopy(t testing.TB, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
