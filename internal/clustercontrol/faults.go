package clustercontrol

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/internal/httpserve"
)

// Fault makes the server misbehave on a path.
type Fault struct {
	// Status, when non-zero, is answered instead of serving the request.
	Status int
	// RetryAfter is sent as the Retry-After header with Status.
	RetryAfter string
	// Delay stalls each request this long before the Status (or the normal
	// answer), or until the client gives up or the faults change. It may
	// exceed the server's read and write timeouts: the stalled request's
	// deadlines are extended by Delay.
	Delay time.Duration
	// Times limits the fault to the next n requests; 0 means until cleared.
	Times int
}

// SetFault installs f for path ("" for every path), replacing the previous
// one. Requests stalled by an earlier Delay are released.
func (s *Server) SetFault(path string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &f
	s.releaseStalled()
}

// ClearFaults removes every fault and releases stalled requests.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
	s.releaseStalled()
}

// releaseStalled wakes every request waiting in a Delay. Called with the
// lock held.
func (s *Server) releaseStalled() {
	close(s.faultsGen)
	s.faultsGen = make(chan struct{})
}

// applyFault answers r with the fault for its path, if any, and reports
// whether it did.
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	f, ok := s.faults[r.URL.Path]
	if !ok {
		f, ok = s.faults[""]
	}
	if !ok {
		s.mu.Unlock()
		return false
	}
	cur := *f
	if f.Times > 0 {
		f.Times--
		if f.Times == 0 {
			for p, g := range s.faults {
				if g == f {
					delete(s.faults, p)
				}
			}
		}
	}
	released := s.faultsGen
	if cur.Delay > 0 {
		s.stalled++
	}
	s.mu.Unlock()
	if cur.Delay > 0 {
		// The stall is the point of the fault, not a slow client: push the
		// server's read and write deadlines past it, so the body can still
		// be read and the answer still written afterwards. Errors mean a
		// writer without a connection (httptest.ResponseRecorder), which
		// has no deadlines to extend.
		rc := http.NewResponseController(w)
		now := time.Now()
		_ = rc.SetReadDeadline(now.Add(cur.Delay + s.opts.HTTP.ReadTimeout))
		_ = rc.SetWriteDeadline(now.Add(cur.Delay + s.opts.HTTP.WriteTimeout))
		t := time.NewTimer(cur.Delay)
		defer t.Stop()
		var again bool
		select {
		case <-r.Context().Done():
		case <-released:
			again = true
		case <-t.C:
		}
		s.mu.Lock()
		s.stalled--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return true
		}
		if again {
			// The faults changed while this request waited: serve it as
			// things are now.
			return s.applyFault(w, r)
		}
	}
	if cur.Status == 0 {
		return false
	}
	if cur.RetryAfter != "" {
		w.Header().Set("Retry-After", cur.RetryAfter)
	}
	writeError(w, cur.Status, fmt.Sprintf("injected fault: %d", cur.Status))
	return true
}

// listenerState lets the API listener be closed and reopened while Serve
// runs, which is how the server plays "down": connections are refused, not
// merely answered with an error.
type listenerState struct {
	mu      sync.Mutex
	down    bool
	changed chan struct{}
}

func newListenerState() listenerState {
	return listenerState{changed: make(chan struct{})}
}

// SetDown closes (true) or reopens (false) the API listener. Connections
// in flight when it goes down are cut.
func (s *Server) SetDown(down bool) {
	s.lis.mu.Lock()
	defer s.lis.mu.Unlock()
	if s.lis.down == down {
		return
	}
	s.lis.down = down
	close(s.lis.changed)
	s.lis.changed = make(chan struct{})
}

func (s *Server) downState() (bool, <-chan struct{}) {
	s.lis.mu.Lock()
	defer s.lis.mu.Unlock()
	return s.lis.down, s.lis.changed
}

// Serve serves the API on ln until ctx ends. While the server is down the
// listener is closed; coming back up listens again on ln's address.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr := ln.Addr().String()
	h := s.Handler()
	for {
		down, changed := s.downState()
		if down {
			if ln != nil {
				_ = ln.Close()
				ln = nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", addr); err != nil {
				return fmt.Errorf("cannot listen again on %s: %w", addr, err)
			}
		}
		// A change of state cuts the listener and every open connection
		// at once, which is what an outage looks like to the reporter.
		up, cut := context.WithCancelCause(ctx)
		go func() {
			select {
			case <-changed:
				cut(httpserve.ErrCut)
			case <-up.Done():
			}
		}()
		err := httpserve.Serve(up, ln, h, s.opts.HTTP)
		cut(nil)
		if err != nil || ctx.Err() != nil {
			return err
		}
		// Serve closed ln; the next round listens again, or stays down.
		ln = nil
	}
}
