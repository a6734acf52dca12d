package server

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// MemoryLimit is the process's memory limit: GOMEMLIMIT (which the
// deployment sets to the container's limit), else its memory cgroup's
// limit, else 0 for none.
func MemoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	return cgroupMemoryLimit(os.ReadFile)
}

// cgroupMemoryLimit is the limit of the memory cgroup the process is in,
// cgroup v2 or v1 (read through readFile), or 0 for none.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	self, err := readFile("/proc/self/cgroup")
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
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	if file == "" {
		return 0
	}
	raw, err := readFile(file)
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

// goMemoryShare is how much of the cgroup's memory limit the Go runtime's
// own limit may take. The runtime counts only what it manages; the rest of
// the limit is for what it does not: the binary's pages, the kernel's
// socket buffers, thread stacks outside Go. Measured here with the
// worst-case requests at 256 MiB (TestWorstCaseFitsTheMemoryLimit): with
// the runtime allowed the whole limit the resident set peaked at 249.5
// MiB, 97% of it; at this share it peaked at 228–229 MiB, 89%.
const goMemoryShare = 0.85

// TuneMemory lowers the Go runtime's memory limit to goMemoryShare of the
// cgroup's limit when it is higher (as when GOMEMLIMIT is set to the
// container's limit, which is what the Deployment does), and returns the
// runtime's limit then (0 for none).
func TuneMemory() int64 {
	cg := cgroupMemoryLimit(os.ReadFile)
	cur := debug.SetMemoryLimit(-1)
	if cg > 0 {
		if share := int64(float64(cg) * goMemoryShare); cur > share {
			debug.SetMemoryLimit(share)
			cur = share
		}
	}
	if cur == math.MaxInt64 {
		// The runtime's "no limit".
		return 0
	}
	return cur
}

// DefaultInFlightBytes budgets three quarters of the memory limit for what
// requests hold: each is charged its body's buffer as it is read and then
// DecodedCost bytes per body byte for decoding and working on it, so the
// budget bounds requests as they cost decoded. The last quarter is the
// runtime, the hand-off queue, the metrics and the garbage collector's
// room below GOMEMLIMIT. At 256 MiB that is 192 MiB: a maximum-size (8
// MiB) request is charged 72 MiB, so two fit at once beside as many small
// ones as the rest allows (a 30 KiB Workspace sync is charged about 290
// KiB). Without a limit it is 192 MiB too. The budget never falls below
// one maximum-size request, or such a request could never be served.
func DefaultInFlightBytes(limit, maxBody int64) int64 {
	one := requestCost(maxBody)
	if limit <= 0 {
		return max(192<<20, one)
	}
	return max(limit/4*3, one)
}

// requestCost is what the in-flight budget charges a request of body
// bytes: its buffer and what decoding it holds.
func requestCost(body int64) int64 {
	return bodyBufferSize(body+1) + DecodedCost*body
}

// DefaultGCPercent is the hook server's GOGC when the environment sets
// none. Its live heap is small and steady (a few MiB: the codec's compiled
// types, pools, metrics) while every sync allocates tens of KiB, so at the
// runtime's default of 100 it collects on every few hundred requests and
// spends a fifth of its CPU doing so. Twice the headroom halves that for a
// few MiB of heap (make bench prints the peak RSS; docs/testing.md), and
// GOMEMLIMIT, which the deployment sets to the container's limit, still
// bounds the heap whatever GOGC says.
const DefaultGCPercent = 200

// TuneGC sets DefaultGCPercent unless GOGC is set, which always wins.
func TuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
