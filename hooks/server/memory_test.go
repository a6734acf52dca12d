package server

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultInFlightBytes(t *testing.T) {
	cases := map[string]struct {
		reason         string
		limit, maxBody int64
		want           int64
	}{
		"PodLimit":   {reason: "An eighth of the deployment's 256 Mi limit.", limit: 256 << 20, maxBody: 8 << 20, want: 32 << 20},
		"SmallLimit": {reason: "Never below one maximum-size body, or such a body could never be served.", limit: 32 << 20, maxBody: 8 << 20, want: 8 << 20},
		"NoLimit":    {reason: "Without a memory limit, a fixed 64 MiB.", maxBody: 8 << 20, want: 64 << 20},
		"HugeBody":   {reason: "Without a limit, still at least one body.", maxBody: 100 << 20, want: 100 << 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DefaultInFlightBytes(tc.limit, tc.maxBody)); diff != "" {
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
