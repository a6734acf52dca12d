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

// goMemoryShare is how much of the process's memory limit the Go runtime's
// own limit may take. The runtime counts only what it manages; the rest of
// the limit is for what it does not: the binary's pages (15 MiB resident),
// the kernel's socket buffers, thread stacks outside Go. Measured with the
// worst-case requests at 256 MiB (TestWorstCaseFitsTheMemoryLimit, medians
// of five runs): with the runtime allowed the whole limit the resident set
// peaked at 264.6 MiB in a memory cgroup of that limit and at 268.1 MiB
// with GOMEMLIMIT alone, both over it; at this share, at 230.0 MiB either
// way, 90% of it.
const goMemoryShare = 0.85

// TuneMemory sets the Go runtime's memory limit to goMemoryShare of the
// process's memory limit and returns both, 0 for none (see memoryLimits).
// It is called once, at start: it reads GOMEMLIMIT back from the runtime's
// limit, which it then lowers.
func TuneMemory() (limit, runtime int64) {
	limit, runtime = memoryLimits(debug.SetMemoryLimit(-1), cgroupMemoryLimit(os.ReadFile))
	if runtime > 0 {
		debug.SetMemoryLimit(runtime)
	}
	return limit, runtime
}

// MemoryLimit is the memory the process must stay within as it stands,
// 0 for none (see memoryLimits). After TuneMemory it reads the runtime's
// lowered limit; serve keeps what TuneMemory returned instead.
func MemoryLimit() int64 {
	limit, _ := memoryLimits(debug.SetMemoryLimit(-1), cgroupMemoryLimit(os.ReadFile))
	return limit
}

// memoryLimits is the memory the process must stay within and the Go
// runtime's limit inside it, 0 for none, given GOMEMLIMIT as the runtime
// read it (goLimit, math.MaxInt64 when unset) and the memory cgroup's limit
// (cgroupLimit, 0 for none). Either is taken for the container's limit:
// the deployment sets GOMEMLIMIT to it, and the cgroup may not be visible
// (no /sys/fs/cgroup in the container, a sandboxed runtime) or the server
// be run by hand with GOMEMLIMIT alone. With both, the tighter binds. Whichever it is, the runtime gets the same
// share of it, so that what the runtime does not count fits too.
func memoryLimits(goLimit, cgroupLimit int64) (limit, runtime int64) {
	for _, l := range []int64{goLimit, cgroupLimit} {
		if l > 0 && l < math.MaxInt64 && (limit == 0 || l < limit) {
			limit = l
		}
	}
	return limit, int64(float64(limit) * goMemoryShare)
}

// DefaultInFlightBytes budgets three quarters of the memory limit for what
// requests hold: each is charged its body's buffer as it is read and then
// DecodedCost bytes per body byte for decoding and working on it, so the
// budget bounds requests as they cost decoded. The last quarter is, below
// the runtime's limit (goMemoryShare of the limit), the hand-off queue, the
// metrics and the garbage collector's room, and above it what the runtime
// does not count. At 256 MiB that is 192 MiB: a maximum-size (8
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
// few MiB of heap (make bench prints the peak RSS; docs/performance.md), and
// the runtime's memory limit (TuneMemory) still bounds the heap whatever
// GOGC says.
const DefaultGCPercent = 200

// TuneGC sets DefaultGCPercent unless GOGC is set, which always wins.
func TuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
