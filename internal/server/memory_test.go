package server

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/formspec/formspec-hooks/internal/memlimit"
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
	// share256 is goMemoryShare of 256 MiB: 217.6 MiB. Which limit binds
	// is memlimit's (TestOf); here, the share the runtime gets of it.
	const share256 = 228170137
	type limits struct{ Limit, Runtime int64 }
	for name, tc := range map[string]struct {
		reason string
		limit  memlimit.Limit
		want   limits
	}{
		"Limit":   {reason: "The runtime gets its share of the limit, whichever it is.", limit: memlimit.Of(math.MaxInt64, 256<<20), want: limits{256 << 20, share256}},
		"NoLimit": {reason: "No limit, and the runtime keeps none.", limit: memlimit.Of(math.MaxInt64, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			var got limits
			got.Limit, got.Runtime = memoryLimits(tc.limit)
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
