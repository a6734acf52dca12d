// Package coldcache lets a benchmark measure a call as it costs when calls
// arrive far apart, as Metacontroller's do: between two calls the
// processor runs other processes (the API server, etcd, Metacontroller
// itself), and the next call finds its code and data out of the caches. In
// a plain benchmark loop every call finds them warm, which hides how much
// a longer path costs (docs/performance.md, "Cold calls in a benchmark").
package coldcache

import "testing"

// size is well above the per-core L2 of the machines this project is
// measured on (2 MiB here): writing over it leaves the L1 and L2 caches
// holding its lines instead of a call's. It does not flush a shared L3 of
// hundreds of MiB, and neither do a call's neighbours.
const size = 32 << 20

var buf = make([]byte, size)

// Evict writes one byte of every cache line of a buffer larger than L2.
// Call it with the benchmark timer stopped (Loop does).
func Evict() {
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
}

// Loop runs call as b's loop body, evicting the caches before each call
// with the timer stopped, so that only the calls are timed.
func Loop(b *testing.B, call func()) {
	for b.Loop() {
		b.StopTimer()
		Evict()
		b.StartTimer()
		call()
	}
}

// Call is a hook call a benchmark posts: a path and the fixture directory
// (under fixtures/) whose request.json it posts.
type Call struct{ Path, Fixture string }

// Calls are the calls cmd/formspec-hooks's BenchmarkColdCalls and
// test/e2e/trivialhook's BenchmarkColdAnswer both post, so that the two
// compare.
var Calls = []Call{
	{"/v1/workspace/sync", "workspace/sync/first-sync"},
	{"/v1/workspace/sync", "workspace/sync/steady-ready"},
	{"/v1/workspace/customize", "workspace/customize/class-only"},
	{"/v1/pods/sync", "pods/sync/running-pod"},
	// A tenth of TestScale's workspaces claim a Datastore: each claim is
	// granted once and verified again at every resync.
	{"/v1/resourceclaim/sync", "resourceclaim/sync/granted-v2"},
	{"/v1/resourceclaim/sync", "resourceclaim/sync/granted-unchanged"},
	{"/v1/resourceclaim/customize", "resourceclaim/customize/same-namespace"},
}
