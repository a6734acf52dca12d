package ccclient

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRetryAfter(t *testing.T) {
	cases := map[string]struct {
		reason string
		value  string
		want   time.Duration
	}{
		"Seconds":  {reason: "delay-seconds", value: "7", want: 7 * time.Second},
		"Date":     {reason: "an HTTP date in the future", value: t0.Add(time.Minute).Format(http.TimeFormat), want: time.Minute},
		"PastDate": {reason: "a date in the past means now", value: t0.Add(-time.Minute).Format(http.TimeFormat), want: 0},
		"Huge":     {reason: "absurd values are capped", value: "86400", want: maxRetryAfter},
		"Garbage":  {reason: "garbage is ignored", value: "soon", want: 0},
		"Empty":    {reason: "absent", value: "", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseRetryAfter(tc.value, t0)); diff != "" {
				t.Errorf("%s (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}
