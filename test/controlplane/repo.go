package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MetacontrollerCRDsFile is Metacontroller's published CRDs, kept beside the
// repository (never in it) in ../shared/testdata.
const MetacontrollerCRDsFile = "shared/testdata/metacontroller-crds-v1.yaml"

// RepoRoot is the directory of this repository's go.mod, found from the
// test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/formspec/formspec-hooks\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.mod of github.com/formspec/formspec-hooks)")
		}
		dir = parent
	}
}

// PublishedMetacontrollerCRDs returns the path of Metacontroller's published
// CRDs, looking for MetacontrollerCRDsFile in each directory above the
// repository root; ok is false when there is none.
func PublishedMetacontrollerCRDs(t testing.TB) (path string, ok bool) {
	t.Helper()
	root := RepoRoot(t)
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		path := filepath.Join(dir, MetacontrollerCRDsFile)
		if _, err := os.Stat(path); err == nil {
			return path, true
		}
		if filepath.Dir(dir) == dir {
			return "", false
		}
	}
}

// MetacontrollerCRDs returns the path of Metacontroller's published CRDs or,
// when they are absent, of minimal stand-ins written to a temporary file,
// which accept any spec: enough to check the controllers' kinds and
// metadata, not their fields.
func MetacontrollerCRDs(t testing.TB) string {
	t.Helper()
	if path, ok := PublishedMetacontrollerCRDs(t); ok {
		return path
	}
	t.Logf("%s not found above the repository: using minimal Metacontroller CRDs that accept any spec", MetacontrollerCRDsFile)
	return tempFile(t, "metacontroller-crds.yaml", minimalMetacontrollerCRDs)
}

// tempFile writes content to a file named name in a temporary directory
// removed after the test, and returns its path.
func tempFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// minimalMetacontrollerCRDs stand in for Metacontroller's CRDs when the
// shared test data is absent.
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
  names: {kind: CompositeController, plural: compositecontrollers, singular: compositecontroller, shortNames: [cc, cctl]}
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
  names: {kind: DecoratorController, plural: decoratorcontrollers, singular: decoratorcontroller, shortNames: [dec, decorators]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
