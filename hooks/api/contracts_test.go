// Package api_test checks the rule of hooks/api: the contracts between the
// three processes import nothing of the code on either side of them, so
// that each side depends on the contract and never on the other side.
package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/formspec/formspec-hooks"

// TestContractsImportNoImplementation lists what every package under
// hooks/api imports from this module, directly or not: only other
// contracts.
func TestContractsImportNoImplementation(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the contracts' imports")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	contracts := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		contracts++
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/hooks/api/") {
				t.Errorf("%s imports %s; a contract imports only other contracts", fields[0], dep)
			}
		}
	}
	if contracts < 3 {
		t.Errorf("found %d packages under hooks/api, want at least v1alpha1, observation and clustercontrol", contracts)
	}
}
