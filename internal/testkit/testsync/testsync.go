// Package testsync holds what the tests of concurrent code share:
// waiting until a condition holds, and a buffer that several goroutines
// write while a test reads it.
package testsync

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond until it holds. The deadline is a liveness bound that
// turns a hang into a failure naming what was awaited; no assertion
// depends on how long anything took.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, 20*time.Second, what, cond)
}

// WaitWithin is WaitFor with another liveness bound, for waits on whole
// processes (a Prometheus scrape, a pod starting) on a busy machine.
func WaitWithin(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe for concurrent writers, such as a logger
// that background loops write to.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
