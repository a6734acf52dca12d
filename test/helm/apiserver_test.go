package helm

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// metacontrollerCRDsFile is Metacontroller's published CRDs, kept beside
// the repository (not in it) in ../shared/testdata.
const metacontrollerCRDsFile = "shared/testdata/metacontroller-crds-v1.yaml"

// minimalMetacontrollerCRDs stand in for Metacontroller's CRDs when the
// shared test data is absent, as in test/integration: they accept any spec,
// so only the controllers' kinds and metadata are checked.
const minimalMetacontrollerCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: compositecontrollers.metacontroller.k8s.io
  annotations:
    # *.k8s.io groups are protected: the API server wants this annotation.
    api-approved.kubernetes.io: "https://github.com/metacontroller/metacontroller"
spec:
  group: metacontroller.k8s.io
  scope: Cluster
  names: {kind: CompositeController, plural: compositecontrollers, singular: compositecontroller}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: decoratorcontrollers.metacontroller.k8s.io
  annotations:
    # *.k8s.io groups are protected: the API server wants this annotation.
    api-approved.kubernetes.io: "https://github.com/metacontroller/metacontroller"
spec:
  group: metacontroller.k8s.io
  scope: Cluster
  names: {kind: DecoratorController, plural: decoratorcontrollers, singular: decoratorcontroller}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// metacontrollerCRDs returns the path of Metacontroller's CRDs from
// shared/testdata in a directory above the repository root, or of the
// minimal stand-ins written to a temporary file.
func metacontrollerCRDs(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		path := filepath.Join(dir, metacontrollerCRDsFile)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	t.Logf("%s not found above %s: using minimal Metacontroller CRDs that accept any spec", metacontrollerCRDsFile, root)
	path := filepath.Join(t.TempDir(), "metacontroller-crds.yaml")
	if err := os.WriteFile(path, []byte(minimalMetacontrollerCRDs), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAPIServer installs what `helm install` would into a real
// kube-apiserver, as far as a dry run goes: Metacontroller's CRDs (a
// prerequisite), the chart's crds/ (Helm applies them first, for real), the
// release namespace (--create-namespace), then every rendered object of
// every release in releases, server-side applied with dryRun=All, so that
// schemas, defaulting and validation (including Metacontroller's schema for
// endpointConfigs and https webhooks) judge them. Skips without
// FORMSPEC_K8S_BIN.
func TestAPIServer(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	mc := metacontrollerCRDs(t)
	if err := c.InstallCRDs(mc); err != nil {
		t.Fatalf("cannot install Metacontroller CRDs from %s: %v", mc, err)
	}
	crds, err := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in the chart's crds/ (%v)", err)
	}
	if err := c.InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install the chart's CRDs: %v", err)
	}

	names := make([]string, 0, len(releases))
	for name := range releases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := releases[name]
		t.Run(name, func(t *testing.T) {
			ensureNamespace(t, c, r.namespace)
			for _, obj := range render(t, r).objects {
				id := identity(obj)
				t.Run(id, func(t *testing.T) {
					if _, err := c.DryRunApply(obj, "formspec-helm-test"); err != nil {
						t.Errorf("the API server rejects %s of release %s: %v", id, name, err)
					}
				})
			}
		})
	}
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(t testing.TB, c *controlplane.Client, name string) {
	t.Helper()
	_, err := c.Create(controlplane.Object{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	})
	var apiErr *controlplane.APIError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict) {
		t.Fatalf("cannot create namespace %s: %v", name, err)
	}
}
