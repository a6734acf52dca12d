// Package lograte keeps a flood of alike events from flooding the log:
// one client failing a thousand times a second must not write a thousand
// lines a second (metrics count every one; the log needs only enough to
// say what is going on).
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter lets through at most one line per key per interval. A line let
// through after others of its key were held back says how many, in the
// attribute "suppressed". It is safe for concurrent use; the zero value is
// not usable (use New).
type Limiter struct {
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// maxKeys bounds the memory a Limiter keeps: keys are a small fixed set
// (a kind of refusal and its reason), but a bug that put a client address
// in a key must not grow the map without end. Past it, the oldest keys
// are forgotten.
const maxKeys = 1024

// New returns a Limiter writing to logger.
func New(logger *slog.Logger, interval time.Duration) *Limiter {
	return &Limiter{logger: logger, interval: interval, now: time.Now, keys: map[string]*entry{}}
}

// Log writes the line unless another of key was written less than an
// interval ago. key must come from a small fixed set.
func (l *Limiter) Log(ctx context.Context, key string, level slog.Level, msg string, args ...any) {
	now := l.now()
	l.mu.Lock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) >= maxKeys {
			l.forgetOldest()
		}
		e = &entry{}
		l.keys[key] = e
	}
	if !e.last.IsZero() && now.Sub(e.last) < l.interval {
		e.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.last, e.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	l.logger.Log(ctx, level, msg, args...)
}

func (l *Limiter) forgetOldest() {
	var oldest string
	for k, e := range l.keys {
		if oldest == "" || e.last.Before(l.keys[oldest].last) {
			oldest = k
		}
	}
	delete(l.keys, oldest)
}
