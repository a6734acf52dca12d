package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// helmRelease installs and upgrades the chart on the cluster as the helm
// command does, through test/helm's cmd/release (the Helm library, kept in
// test/helm's module): releases stored in the cluster, lookup answered by
// it, upgrades merged against the last release. Unlike helmInstallChart,
// which applies what a first install renders, it makes a release a later
// helm upgrade can take over.
type helmRelease struct {
	bin        string
	kubeconfig string
}

// newHelmRelease builds cmd/release for the test.
func (c *Cluster) newHelmRelease(t *testing.T) *helmRelease {
	t.Helper()
	out := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/release")
	cmd.Dir = filepath.Join(controlplane.RepoRoot(t), "test", "helm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build test/helm/cmd/release: %v\n%s", err, b)
	}
	return &helmRelease{bin: out, kubeconfig: c.Kubeconfig}
}

// install installs chart (a directory or a .tgz) as the release
// formspec-hooks in formspec-system with values (YAML) and sets (as
// --set), after Metacontroller's CRDs and the namespace deploy/ makes,
// and waits for the hook pods to be ready.
func (h *helmRelease) install(t *testing.T, c *Cluster, chart, values string, sets ...string) {
	t.Helper()
	if err := c.Client().InstallCRDs(controlplane.MetacontrollerCRDs(t)); err != nil {
		t.Fatalf("cannot install Metacontroller's CRDs: %v", err)
	}
	c.kubectl(t, "apply", "-f", filepath.Join(controlplane.RepoRoot(t), "deploy", "hooks", "namespace.yaml"))
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-chart", chart, "-values", valuesFile}
	for _, s := range sets {
		args = append(args, "-set", s)
	}
	t.Log(h.run(t, args...))
	c.waitDeploymentReady(t, hooksNamespace, hooksName)
}

// upgrade runs helm upgrade of the release to chart with sets (as --set),
// taking the new chart's defaults and the values the release was given
// (--reset-then-reuse-values, as docs/install.md upgrades). It returns
// when Helm has applied the release; the caller waits for the rollout.
func (h *helmRelease) upgrade(t *testing.T, chart string, sets ...string) {
	t.Helper()
	args := []string{"-chart", chart, "-upgrade", "-reset-then-reuse-values"}
	for _, s := range sets {
		args = append(args, "-set", s)
	}
	t.Log(h.run(t, args...))
}

func (h *helmRelease) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(h.bin, append([]string{"-kubeconfig", h.kubeconfig, "-name", hooksName, "-namespace", hooksNamespace}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
