// Package binaries builds the module's commands for the tests that run
// them as a user would, once per test process into a temporary folder
// that Remove deletes (call it from TestMain), and runs a command for the
// length of a test.
package binaries

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
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

// Start runs bin with args until the test ends, its output (stdout and
// stderr together) in the returned buffer, which the test's log shows if
// the test fails.
func Start(t testing.TB, bin string, args ...string) *testsync.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	logs := &testsync.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", filepath.Base(bin), logs.String())
		}
	})
	return logs
}
