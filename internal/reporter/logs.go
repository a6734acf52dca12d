package reporter

import (
	"sync"
	"time"
)

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

// warn logs msg with args, at most once per LogInterval for key, saying
// how many it held back since, and err.
func (r *Reporter) warn(key, msg string, err error, args ...any) {
	if ok, held := r.limiter.allow(key, r.cfg.now()); ok {
		r.log.Warn(msg, append(args, "suppressed", held, "err", err)...)
	}
}

// logKeyNoToken rate-limits the missing-token warning apart from the
// endpoints' failure logs.
const logKeyNoToken = "token-file"

// logKeyDirectives rate-limits the failure log of directive writes.
const logKeyDirectives = "directive-write"

// logKeyDirectiveRefused rate-limits the log of refused directives: a
// flood of forged ones must not flood the log too.
const logKeyDirectiveRefused = "directive-refused"

// logKeyTombstones rate-limits the failure log of the tombstone file.
const logKeyTombstones = "tombstone-file"
