package reporter

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestWithDefaults checks that a zero duration or limit takes its value
// from Defaults and that a set one stays.
func TestWithDefaults(t *testing.T) {
	set := Defaults
	set.NodeHealthInterval, set.MaxPods, set.EventQPS = time.Second, 7, 0.5
	cases := map[string]struct {
		reason string
		cfg    Config
		want   Config
	}{
		"Zero": {reason: "A zero Config takes every default.", want: Defaults},
		"Set": {
			reason: "Fields that are set keep their values; the others take the defaults.",
			cfg:    Config{NodeHealthInterval: time.Second, MaxPods: 7, EventQPS: 0.5},
			want:   set,
		},
		"Negative": {
			reason: "A negative value is set, not zero: it stays.",
			cfg:    Config{MaxClaims: -1},
			want:   func() Config { c := Defaults; c.MaxClaims = -1; return c }(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.cfg.withDefaults()
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(Config{}), cmpopts.IgnoreFields(Config{}, "Logger")); diff != "" {
				t.Errorf("%s (-want, +got):\n%s", tc.reason, diff)
			}
			if got.Logger == nil || got.now == nil || got.sleep == nil || got.rand == nil {
				t.Errorf("logger, clock, sleep or jitter left nil")
			}
		})
	}
}
