// Package binaries builds the module's commands for the tests that run
// them as a user would: once per test process, into a temporary folder
// that Remove deletes (call it from TestMain).
package binaries

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is the one build of the process: every test shares it.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// Build returns the folder of every command under root's cmd/, built on
// first use with version as their version (the -X of internal/buildinfo),
// so that a test can tell its own build from any other on the PATH.
func Build(t testing.TB, root, version string) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "formspec-cmd-test-"); built.err != nil {
			return
		}
		ldflags := "-X github.com/formspec/formspec-hooks/internal/buildinfo.version=" + version
		cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", built.dir+string(filepath.Separator), "./cmd/...")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// Remove deletes what Build made, if it made anything.
func Remove() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
