package helm

import (
	"errors"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestAPIServer installs what `helm install` would into a real
// kube-apiserver, as far as a dry run goes: Metacontroller's CRDs (a
// prerequisite), stand-ins for cert-manager's and the Prometheus
// Operator's (controlplane.CertManagerCRDs, PrometheusOperatorCRDs), the
// chart's crds/ (Helm applies them first, for real), the release namespace
// (--create-namespace), then every rendered object of every release in
// releases and of every case in valueCases, server-side applied with
// dryRun=All, so that schemas, defaulting and validation (including
// Metacontroller's schema for endpointConfigs and https webhooks, and the
// pod spec's for each scheduling value) judge them. Skips without
// FORMSPEC_K8S_BIN.
func TestAPIServer(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	mc := controlplane.MetacontrollerCRDs(t)
	if err := c.InstallCRDs(mc); err != nil {
		t.Fatalf("cannot install Metacontroller CRDs from %s: %v", mc, err)
	}
	// The cert-manager releases render Issuers and Certificates.
	if err := c.InstallCRDs(controlplane.CertManagerCRDs(t)); err != nil {
		t.Fatalf("cannot install the cert-manager stand-in CRDs: %v", err)
	}
	// Production, NoReporter and the monitoring value cases render
	// ServiceMonitors and PrometheusRules.
	if err := c.InstallCRDs(controlplane.PrometheusOperatorCRDs(t)); err != nil {
		t.Fatalf("cannot install the Prometheus Operator stand-in CRDs: %v", err)
	}
	crds, err := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in the chart's crds/ (%v)", err)
	}
	if err := c.InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install the chart's CRDs: %v", err)
	}

	all := maps.Clone(releases)
	for name, tc := range valueCases {
		all["Value/"+name] = valueRelease(tc.values)
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		r := all[name]
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
