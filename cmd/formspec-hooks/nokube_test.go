package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesClient keeps the hook server free of Kubernetes
// credentials by construction: it links no Kubernetes client at all. Only
// the reporter sidecar talks to the API server (docs/reporter.md).
func TestNoKubernetesClient(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binary's packages")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for pkg := range strings.Lines(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/client-go/") {
			t.Errorf("formspec-hooks links %s; the hook server must not hold a Kubernetes client", strings.TrimSpace(pkg))
		}
	}
}
