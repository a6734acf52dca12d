package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesClient keeps the hook server free of Kubernetes
// credentials by construction: it links no Kubernetes client at all. Only
// the reporter sidecar talks to the API server (docs/reporter.md). Nor
// does it link the reporter or the reference Cluster Control.
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
		pkg = strings.TrimSpace(pkg)
		if strings.HasPrefix(pkg, "k8s.io/client-go/") {
			t.Errorf("formspec-hooks links %s; the hook server must not hold a Kubernetes client", pkg)
		}
		// The hook server talks to its sidecar and to Cluster Control
		// through the contracts in hooks/api, never through the other
		// side's implementation.
		for _, other := range []string{"internal/reporter", "internal/clustercontrol"} {
			if pkg == module+"/"+other || strings.HasPrefix(pkg, module+"/"+other+"/") {
				t.Errorf("formspec-hooks links %s, the other side of a seam; import its contract under hooks/api instead", pkg)
			}
		}
	}
}

const module = "github.com/formspec/formspec-hooks"
