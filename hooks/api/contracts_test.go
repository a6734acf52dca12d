// Package api_test checks the rules of hooks/api: the contracts are the
// module's only importable packages, and they import nothing of the code on
// either side of them, so that each side depends on the contract and never
// on the other side.
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

// TestOnlyContractsArePublic lists every package of the module: each is a
// main under cmd/, internal, a contract under hooks/api, or the test
// tooling under test/, which no one builds against. A package that
// is none of these is one that others could import by mistake and that the
// project would then have to keep stable.
func TestOnlyContractsArePublic(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the module's packages")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{.Name}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		path, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		rel := strings.TrimPrefix(path, module+"/")
		switch {
		case name == "main" && strings.HasPrefix(rel, "cmd/"),
			strings.HasPrefix(rel, "test/"),
			rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/"),
			rel == "hooks/api" || strings.HasPrefix(rel, "hooks/api/"):
		default:
			t.Errorf("package %s is importable from outside the module; move it under internal/, or under hooks/api/ if it is a contract", rel)
		}
	}
}
