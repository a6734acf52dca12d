package server

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultInFlightBytes(t *testing.T) {
	maxReq := requestCost(8 << 20)
	cases := map[string]struct {
		reason         string
		limit, maxBody int64
		want           int64
		// fit is how many maximum-size requests the budget takes at once.
		fit int64
	}{
		"PodLimit":   {reason: "Three quarters of the deployment's 256 Mi limit: two maximum-size requests, charged decoded, fit at once.", limit: 256 << 20, maxBody: 8 << 20, want: 192 << 20, fit: 2},
		"SmallLimit": {reason: "Never below one maximum-size request, or such a request could never be served.", limit: 32 << 20, maxBody: 8 << 20, want: maxReq, fit: 1},
		"NoLimit":    {reason: "Without a memory limit, a fixed 192 MiB.", maxBody: 8 << 20, want: 192 << 20, fit: 2},
		"HugeBody":   {reason: "Without a limit, still at least one request.", maxBody: 100 << 20, want: requestCost(100 << 20), fit: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DefaultInFlightBytes(tc.limit, tc.maxBody)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if fit := got / requestCost(tc.maxBody); fit != tc.fit {
				t.Errorf("%s\n%d maximum-size requests fit in %d, want %d", tc.reason, fit, got, tc.fit)
			}
		})
	}
}

func TestMemoryLimits(t *testing.T) {
	// share256 is goMemoryShare of 256 MiB: 217.6 MiB.
	const share256 = 228170137
	type limits struct{ Limit, Runtime int64 }
	cases := map[string]struct {
		reason               string
		goLimit, cgroupLimit int64
		want                 limits
	}{
		"AsDeployed":      {reason: "GOMEMLIMIT set to the cgroup's limit, as the Deployment sets it: the runtime gets its share.", goLimit: 256 << 20, cgroupLimit: 256 << 20, want: limits{256 << 20, share256}},
		"CgroupAlone":     {reason: "The cgroup's limit alone: the runtime gets its share.", goLimit: math.MaxInt64, cgroupLimit: 256 << 20, want: limits{256 << 20, share256}},
		"GOMEMLIMITAlone": {reason: "GOMEMLIMIT with no cgroup limit found is the container's limit too: the same share, not the whole of it.", goLimit: 256 << 20, want: limits{256 << 20, share256}},
		"GOMEMLIMITAbove": {reason: "A GOMEMLIMIT above the cgroup's limit: the cgroup's binds, for the runtime and the in-flight budget alike.", goLimit: 1 << 30, cgroupLimit: 256 << 20, want: limits{256 << 20, share256}},
		"GOMEMLIMITBelow": {reason: "A GOMEMLIMIT below the cgroup's limit binds, and the runtime gets its share of it.", goLimit: 256 << 20, cgroupLimit: 1 << 30, want: limits{256 << 20, share256}},
		"NoLimit":         {reason: "Neither: no limit, and the runtime keeps none.", goLimit: math.MaxInt64},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got limits
			got.Limit, got.Runtime = memoryLimits(tc.goLimit, tc.cgroupLimit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	cases := map[string]struct {
		reason string
		env    map[string]string
		want   int
	}{
		"Unset": {reason: "Without GOGC the server takes its own default.", want: DefaultGCPercent},
		"Set":   {reason: "GOGC always wins (the runtime read it at start; TuneGC leaves it).", env: map[string]string{"GOGC": "50"}, want: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			debug.SetGCPercent(100)
			TuneGC(func(k string) string { return tc.env[k] })
			if diff := cmp.Diff(tc.want, debug.SetGCPercent(100)); diff != "" {
				t.Errorf("%s\nGC percent: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	cases := map[string]struct {
		reason string
		files  map[string]string
		want   int64
	}{
		"V2": {reason: "cgroup v2: the process's own cgroup's memory.max.", files: map[string]string{
			"/proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"/sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
		}, want: 256 << 20},
		"V2NoLimit": {reason: "\"max\" is no limit.", files: map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "max\n",
		}},
		"V1": {reason: "cgroup v1: the memory controller's path, whatever the other controllers say.", files: map[string]string{
			"/proc/self/cgroup": "9:name=systemd:/\n4:memory:/formspec-test\n0::/\n",
			"/sys/fs/cgroup/memory/formspec-test/memory.limit_in_bytes": "268435456",
		}, want: 256 << 20},
		"V1NoLimit": {reason: "v1 says no limit with a number near the largest int64.", files: map[string]string{
			"/proc/self/cgroup":                           "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
		}},
		"NoCgroup": {reason: "No /proc/self/cgroup: no limit known.", files: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, cgroupMemoryLimit(files(tc.files))); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
