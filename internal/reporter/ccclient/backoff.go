package ccclient

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps how long a Retry-After can silence an endpoint, so a
// misconfigured Cluster Control answering "Retry-After: 86400" cannot mute
// the reporter for a day.
const maxRetryAfter = 10 * time.Minute

// parseRetryAfter reads a Retry-After value, either delay-seconds or an
// HTTP date, relative to now. It returns 0 when the value is absent or
// unusable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// Backoff computes retry delays: exponential growth from Base up to Limit,
// with full jitter (a uniform pick in [0, step]) so reporters in many
// clusters that lost Cluster Control together do not return in lockstep.
type Backoff struct {
	Base, Limit time.Duration
	// Rand picks in [0, 1): DefaultRand, or a fixed source in tests.
	Rand func() float64
}

// Delay is the wait before retry number attempt (0-based), never shorter
// than retryAfter.
func (b Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	step := b.Base
	for i := 0; i < attempt && step < b.Limit; i++ {
		step *= 2
	}
	step = min(step, b.Limit)
	d := time.Duration(b.Rand() * float64(step))
	return max(d, retryAfter)
}

// Jitter spreads a periodic interval by ±10% so reporters started together
// drift apart.
func Jitter(interval time.Duration, rnd func() float64) time.Duration {
	return time.Duration(float64(interval) * (0.9 + 0.2*rnd()))
}

// DefaultRand is the production jitter source.
func DefaultRand() float64 { return rand.Float64() }
