package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
