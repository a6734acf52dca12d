package server

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimit is the process's memory limit: GOMEMLIMIT (which the
// deployment sets to the container's limit), else the cgroup v2 limit,
// else 0 for none.
func MemoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	raw, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	l, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || l <= 0 {
		// "max": no limit.
		return 0
	}
	return l
}

// DefaultInFlightBytes budgets an eighth of the memory limit for request
// bodies: a decoded request and its response take a few times the body's
// bytes, and the rest is the runtime, the hand-off queue and headroom
// below GOMEMLIMIT. At 256 MiB that is 32 MiB, four maximum-size bodies at
// once. The budget never falls below one maximum-size body, or such a
// body could never be served.
func DefaultInFlightBytes(limit, maxBody int64) int64 {
	if limit <= 0 {
		return max(64<<20, maxBody)
	}
	return max(limit/8, maxBody)
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
