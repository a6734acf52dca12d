// Package memlimit finds the memory a process must stay within: its
// GOMEMLIMIT and its container's memory cgroup limit. The hook server
// sizes its runtime limit and in-flight budget from it; the reporter sizes
// the bounds that grow with the fleet.
package memlimit

import (
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Where a Limit came from, the values of Limit.Source.
const (
	SourceGOMEMLIMIT = "GOMEMLIMIT"
	SourceCgroup     = "cgroup"
	SourceNone       = "none"
)

// Limit is the memory a process must stay within, in bytes, 0 for none,
// and where it was found.
type Limit struct {
	Bytes  int64
	Source string
}

// Read finds the process's limit: GOMEMLIMIT as the runtime read it, and
// the memory cgroup's limit under root (os.DirFS("/") in production).
func Read(root fs.FS) Limit {
	return Of(debug.SetMemoryLimit(-1), Cgroup(root))
}

// Of is the memory a process must stay within, given GOMEMLIMIT as the
// runtime read it (goLimit, math.MaxInt64 when unset) and the memory
// cgroup's limit (cgroupLimit, 0 for none). Either is taken for the
// container's limit: the installs set GOMEMLIMIT to it, and the cgroup may
// not be visible (no /sys/fs/cgroup in the container, a sandboxed
// runtime) or the process be run by hand with GOMEMLIMIT alone. With both,
// the tighter binds; on a tie the cgroup is named, the limit the kernel
// enforces.
func Of(goLimit, cgroupLimit int64) Limit {
	l := Limit{Source: SourceNone}
	if cgroupLimit > 0 {
		l = Limit{Bytes: cgroupLimit, Source: SourceCgroup}
	}
	if goLimit > 0 && goLimit < math.MaxInt64 && (l.Bytes == 0 || goLimit < l.Bytes) {
		l = Limit{Bytes: goLimit, Source: SourceGOMEMLIMIT}
	}
	return l
}

// Cgroup is the limit of the memory cgroup the process is in, cgroup v2
// or v1, read under root from proc/self/cgroup and sys/fs/cgroup, or 0 for
// none.
func Cgroup(root fs.FS) int64 {
	self, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return 0
	}
	var file string
	for line := range strings.Lines(string(self)) {
		// "hierarchy-ID:controllers:path"; v2 is "0::path".
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "" && file == "":
			file = path.Join("sys/fs/cgroup", parts[2], "memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = path.Join("sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	if file == "" {
		return 0
	}
	raw, err := fs.ReadFile(root, file)
	if err != nil {
		return 0
	}
	l, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	// v2 says "max" for none, v1 a number near the largest int64.
	if err != nil || l <= 0 || l >= 1<<62 {
		return 0
	}
	return l
}
