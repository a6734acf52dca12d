// Package docs tests the repository's prose as a reader meets it: the
// README's and docs' walkthroughs run against the built commands, the
// demo's ports as `make run` opens them, and the rules every document
// keeps. They read the whole tree, so they live here rather than beside
// one command.
package docs

import (
	"os"
	"testing"

	"github.com/formspec/formspec-hooks/internal/testkit/binaries"
)

// root is the repository, seen from this package.
const root = "../.."

// buildBinaries returns the folder of the built commands, built once for
// the package's tests; TestMain removes it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	return binaries.Build(t, root, "v0.0.0-doctest")
}

func TestMain(m *testing.M) {
	code := m.Run()
	binaries.Remove()
	os.Exit(code)
}
