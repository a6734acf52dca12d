package reporter

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
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

// backoff computes retry delays: exponential growth from base up to limit,
// with full jitter (a uniform pick in [0, step]) so reporters in many
// clusters that lost Cluster Control together do not return in lockstep.
type backoff struct {
	base, limit time.Duration
	rand        func() float64
}

// delay is the wait before retry number attempt (0-based), never shorter
// than retryAfter.
func (b backoff) delay(attempt int, retryAfter time.Duration) time.Duration {
	step := b.base
	for i := 0; i < attempt && step < b.limit; i++ {
		step *= 2
	}
	step = min(step, b.limit)
	d := time.Duration(b.rand() * float64(step))
	return max(d, retryAfter)
}

// jitter spreads a periodic interval by ±10% so reporters started together
// drift apart.
func jitter(interval time.Duration, rnd func() float64) time.Duration {
	return time.Duration(float64(interval) * (0.9 + 0.2*rnd()))
}

// defaultRand is the production jitter source.
func defaultRand() float64 { return rand.Float64() }

// logLimiter lets through at most one failure log per key per interval and
// counts what it held back, so an hour-long outage costs a few hundred log
// lines, not one per attempt.
type logLimiter struct {
	interval time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
	held     map[string]int
}

func newLogLimiter(interval time.Duration) *logLimiter {
	return &logLimiter{interval: interval, last: map[string]time.Time{}, held: map[string]int{}}
}

// allow reports whether a line for key may be logged now, and how many were
// suppressed since the previous one.
func (l *logLimiter) allow(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last[key]; ok && now.Sub(last) < l.interval {
		l.held[key]++
		return false, 0
	}
	l.last[key] = now
	n := l.held[key]
	l.held[key] = 0
	return true, n
}
