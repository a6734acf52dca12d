// Package buildinfo says which build of formspec-hooks is running: the
// version stamped at link time, else the module version Go recorded, and
// the VCS revision when the build had one. Every binary prints it for
// `version` and `--version`, and the hook server exports it as a gauge.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set by the linker:
//
//	go build -ldflags "-X github.com/formspec/formspec-hooks/hooks/buildinfo.version=v1.2.3"
//
// `make build` and the Dockerfile set it from VERSION, and revision from
// REVISION, which stands in when Go recorded no VCS revision (a build with
// -buildvcs=false, or in a container without .git).
var version, revision string

// Info identifies a build.
type Info struct {
	// Version is the linker-stamped version, else the main module's
	// version (set by `go install module@version`), else "dev".
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
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return withDefault(info)
	}
	if info.Version == "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return withDefault(info)
}

func withDefault(info Info) Info {
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}

// String is the one line `version` prints, e.g.
// "v1.2.3 (revision 0a1b2c3, go1.26.8)".
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
