// Package fleetlimits derives the reporter's bounds that grow with the
// fleet (the workspaces it tracks, with the claims, pods and deletions
// that come with them) from the memory the reporter is given, so that a
// larger fleet needs a larger memory limit and nothing else.
//
// The rule, in one line: keep a quarter of the memory limit (at least
// BaselineMin) for the process itself, and divide the rest by
// BytesPerWorkspace. The other bounds follow the workspaces in the
// ratios of the defaults. Without a memory limit the defaults stand.
package fleetlimits

import (
	"github.com/formspec/formspec-hooks/internal/memlimit"
)

// Limits are the reporter's bounds that grow with the fleet, the values
// of --max-workspaces, --max-tombstones, --max-claims and --max-pods.
// The nodes it tracks (--max-nodes) grow with the cluster, not with the
// Workspaces in it, and keep their fixed default.
type Limits struct {
	Workspaces, Tombstones, Claims, Pods int
}

// BytesPerWorkspace is what one tracked workspace is charged, with its
// share of the other bounds. BenchmarkMemory in internal/reporter, medians
// of five runs (docs/reporter.md): a workspace with a 1.7 KiB status holds
// 2.3–2.4 KiB of heap and 3.6 KiB resident; a remembered claim 0.22 KiB of
// heap and a deletion waiting for Cluster Control 0.54 KiB. A workspace
// with two claims and half a deletion (the ratios below) is 3.1 KiB of
// live heap;
// twice that, for the garbage collector's room at GOGC=100, is 6.3 KiB,
// and the rest of the 8 KiB is for what the benchmark does not hold: the
// workspace's pods, its entry in the watch of Workspaces, reports in
// flight.
const BytesPerWorkspace = 8 << 10

// BaselineShare and BaselineMin are what the derivation keeps of the
// limit for the process itself: the binary, the runtime, the client-go
// caches and buffers, the metrics. The reporter binary starts at 25 MiB
// resident (the benchmark's test process at 33 MiB); a quarter of a
// larger limit also leaves the headroom a heap near the runtime's limit
// needs. Filled to the bounds this derives, BenchmarkMemory's process
// peaks at 55 MiB of 64 Mi, 90 of 128 and 156 of 256.
const (
	BaselineShare = 4 // one in four
	BaselineMin   = 32 << 20
)

// MinWorkspaces is the least the derivation gives, whatever the limit: a
// limit below BaselineMin plus this many workspaces' worth is too small
// for the reporter anyway, and a bound of zero would drop every
// observation.
const MinWorkspaces = 1000

// The other bounds per workspace, today's defaults' ratios: a deletion
// waiting for every second workspace, two claims and ten pods per
// workspace.
const (
	tombstonesPerWorkspace = 0.5
	claimsPerWorkspace     = 2
	podsPerWorkspace       = 10
)

// ForWorkspaces is the bounds for a fleet of n workspaces.
func ForWorkspaces(n int) Limits {
	return Limits{
		Workspaces: n,
		Tombstones: int(float64(n) * tombstonesPerWorkspace),
		Claims:     n * claimsPerWorkspace,
		Pods:       n * podsPerWorkspace,
	}
}

// ForMemory is the bounds that fit in limit bytes (the rule of the
// package comment).
func ForMemory(limit int64) Limits {
	baseline := max(limit/BaselineShare, BaselineMin)
	n := (limit - baseline) / BytesPerWorkspace
	return ForWorkspaces(int(max(n, MinWorkspaces)))
}

// MemoryFor is the memory limit at which ForMemory gives n workspaces, to
// size a container for a fleet: the inverse of ForMemory, rounded up.
func MemoryFor(n int) int64 {
	budget := int64(n) * BytesPerWorkspace
	// Above BaselineMin*BaselineShare the baseline is a share of the limit.
	if budget+BaselineMin < BaselineMin*BaselineShare {
		return budget + BaselineMin
	}
	return (budget*BaselineShare + BaselineShare - 2) / (BaselineShare - 1)
}

// Derive is the bounds for a reporter given mem (memlimit.Read), or
// defaults when no limit was found.
func Derive(mem memlimit.Limit, defaults Limits) Limits {
	if mem.Bytes <= 0 {
		return defaults
	}
	return ForMemory(mem.Bytes)
}
