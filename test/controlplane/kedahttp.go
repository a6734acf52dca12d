package controlplane

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// KEDAHTTPModuleDir is the module that pins the KEDA HTTP add-on, relative
// to the repository: it builds the interceptor (test/keda-binaries.sh), and
// its module cache copy holds the add-on's CRDs.
const KEDAHTTPModuleDir = "test/keda/binaries"

// KEDAHTTPCRDs returns the KEDA HTTP add-on's CRD files (InterceptorRoute
// and HTTPScaledObject) at the version test/keda/binaries pins, from the Go
// module cache: `go mod download` fetches the module there when it is not
// yet, through the module proxy, so nothing of the add-on is kept in this
// repository.
func KEDAHTTPCRDs(t testing.TB) ([]string, error) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/kedacore/http-add-on")
	cmd.Dir = filepath.Join(RepoRoot(t), KEDAHTTPModuleDir)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download github.com/kedacore/http-add-on in %s: %w", KEDAHTTPModuleDir, err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download printed no module directory: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(mod.Dir, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs under %s/config/crd/bases (add-on %s): %v", mod.Dir, mod.Version, err)
	}
	return files, nil
}
