// Package buildinfo says which build of formspec-hooks is running: the
// release version written in the file VERSION beside this one, and the VCS
// revision when the build had one. Every binary prints it for `version` and
// `--version`, and the hook server exports it as a gauge.
package buildinfo

import (
	"cmp"
	_ "embed" // the go:embed of VERSION
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// release is the file VERSION: the one place the project's version is
// written (semantic versioning, without a leading v). Every binary embeds
// it, so a plain `go build` or `go install` knows its version; the
// Makefile reads it, and `make sync-version` writes the copies the Helm
// chart, deploy/ and the Dockerfile need literally (a test fails while one
// differs).
//
//go:embed VERSION
var release string

// DevSuffix ends the version main carries between releases: the next
// release's, as a pre-release (0.2.0-dev), so that nothing built from
// main is mistaken for a release. `make release` refuses it unless asked
// for a pre-release (PRERELEASE=1), and its changelog entry is
// "## [Unreleased]" (docs/releasing.md).
const DevSuffix = "-dev"

// ChangelogHeading is the heading of version's entry in CHANGELOG.md:
// "## [Unreleased]" for a development version, else "## [<version>]".
func ChangelogHeading(version string) string {
	if strings.HasSuffix(version, DevSuffix) {
		return "## [Unreleased]"
	}
	return "## [" + version + "]"
}

// Release is the version of this source tree, as VERSION says.
func Release() string { return strings.TrimSpace(release) }

// version and revision are set by the linker:
//
//	go build -ldflags "-X github.com/formspec/formspec-hooks/internal/buildinfo.revision=0a1b2c3"
//
// `make build`, `make release` and the Dockerfile set revision, which
// stands in when Go recorded no VCS revision (a build with
// -buildvcs=false, or in a container without .git). Nothing in the
// repository sets version; it overrides VERSION for a build that must
// say something else (the command-line tests use it).
var version, revision string

// Info identifies a build.
type Info struct {
	// Version is VERSION's, unless the linker stamped another.
	Version string
	// Revision is the VCS commit the binary was built from: Go's record
	// of it, else the linker-stamped REVISION, else empty.
	Revision string
	// Modified is true when the checkout had uncommitted changes.
	Modified bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: cmp.Or(version, Release()), Revision: revision, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `version` prints, e.g.
// "0.1.0 (revision 0a1b2c3, go1.26.8)".
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, rev, i.GoVersion)
}

// Collector returns a gauge <namespace>_build_info, always 1, labelled with
// the version, revision and Go version, so that dashboards can tell which
// build each replica runs (join it on instance) and spot a mixed rollout.
func Collector(namespace string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   namespace,
		Name:        "build_info",
		Help:        "Always 1; its labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
