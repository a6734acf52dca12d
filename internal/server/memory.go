package server

import (
	"os"
	"runtime/debug"

	"github.com/formspec/formspec-hooks/internal/memlimit"
)

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
	limit, runtime = memoryLimits(memlimit.Read(os.DirFS("/")))
	if runtime > 0 {
		debug.SetMemoryLimit(runtime)
	}
	return limit, runtime
}

// MemoryLimit is the memory the process must stay within as it stands,
// 0 for none (see memoryLimits). After TuneMemory it reads the runtime's
// lowered limit; serve keeps what TuneMemory returned instead.
func MemoryLimit() int64 {
	limit, _ := memoryLimits(memlimit.Read(os.DirFS("/")))
	return limit
}

// memoryLimits is the memory the process must stay within (memlimit.Of:
// the tighter of GOMEMLIMIT and the memory cgroup's limit) and the Go
// runtime's limit inside it, 0 for none. Whichever binds, the runtime gets
// the same share of it, so that what the runtime does not count fits too.
func memoryLimits(l memlimit.Limit) (limit, runtime int64) {
	return l.Bytes, int64(float64(l.Bytes) * goMemoryShare)
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
