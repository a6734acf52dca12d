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
