package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// waitTimeout bounds each wait for Metacontroller and the hooks to act.
// Each step takes well under a second; the bound is a guard against a hang
// on a loaded machine, not a performance assertion.
const waitTimeout = 90 * time.Second

// pollInterval is how often a wait looks again.
const pollInterval = 100 * time.Millisecond

// broken wraps an error that ends a wait at once: the state is not merely
// late, it is wrong (a replica count that dropped, say).
type broken struct{ err error }

func (b broken) Error() string { return b.err.Error() }

// fail makes check's error end the wait at once.
func fail(format string, args ...any) error { return broken{fmt.Errorf(format, args...)} }

// eventually polls check until it returns nil. It fails the test, saying
// what it waited for and what check last reported, when check returns an
// error made by fail, when waitTimeout passes, or when the hook server or
// Metacontroller exits.
func (e *env) eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		var b broken
		if errors.As(err, &b) {
			t.Fatalf("while waiting for %s: %v", what, b.err)
		}
		select {
		case <-e.mc.Done():
			t.Fatalf("Metacontroller exited while waiting for %s (last state: %v)", what, err)
		case <-e.hooks.Done():
			t.Fatalf("the hook server exited while waiting for %s (last state: %v)", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v: %v", what, waitTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}
