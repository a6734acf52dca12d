package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	"github.com/google/go-cmp/cmp"
)

// closedURL returns a URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func obs(i int) observation.Observation {
	return observation.Observation{WorkspaceDeleted: &observation.WorkspaceRef{Namespace: "ns", Name: fmt.Sprintf("ws-%d", i)}}
}

// TestSendNeverBlocks sends far more than the queue holds while the sidecar
// is unreachable: every Send returns, and the overflow is counted.
func TestSendNeverBlocks(t *testing.T) {
	const queue, sends = 4, 1000
	cases := map[string]struct {
		reason     string
		run        bool
		minDropped uint64
		maxDropped uint64
	}{
		"NoSender": {
			reason:     "nothing drains the queue: all but the newest QueueSize are dropped",
			minDropped: sends - queue,
			maxDropped: sends - queue,
		},
		"SidecarDown": {
			reason: "the sender fails once and waits; at most one batch leaves the queue",
			run:    true,
			// One failed batch takes at most BatchSize observations out.
			minDropped: sends - queue - 128,
			maxDropped: sends - queue,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := New(closedURL(t), Options{QueueSize: queue, RetryDelay: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.run {
				go func() { _ = c.Run(ctx) }()
			}
			for i := range sends {
				c.Send(obs(i))
			}
			if got := c.Dropped(); got < tc.minDropped || got > tc.maxDropped {
				t.Errorf("%s: Dropped() = %d, want between %d and %d", tc.reason, got, tc.minDropped, tc.maxDropped)
			}
			if got := c.Pending(); got > queue {
				t.Errorf("%s: Pending() = %d exceeds the queue size %d", tc.reason, got, queue)
			}
		})
	}
}

// TestDropOldestKeepsNewest checks which observations survive an overflow.
func TestDropOldestKeepsNewest(t *testing.T) {
	c, err := New("http://127.0.0.1:1", Options{QueueSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c.Send(obs(i))
	}
	var got []string
	for range 3 {
		got = append(got, (<-c.queue).WorkspaceDeleted.Name)
	}
	if diff := cmp.Diff([]string{"ws-7", "ws-8", "ws-9"}, got); diff != "" {
		t.Errorf("queued after overflow (-want, +got):\n%s", diff)
	}
}

// TestRunPostsBatches checks the wire shape the sidecar receives.
func TestRunPostsBatches(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b observation.Batch
		if r.URL.Path != observation.PathObservations || r.Method != http.MethodPost {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("cannot decode batch: %v", err)
		}
		for _, o := range b.Observations {
			got <- o.WorkspaceDeleted.Name
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c, err := New(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Send(obs(1))
	c.Send(obs(2))
	go func() { _ = c.Run(ctx) }()
	var names []string
	for range 2 {
		names = append(names, <-got)
	}
	if diff := cmp.Diff([]string{"ws-1", "ws-2"}, names); diff != "" {
		t.Errorf("observations received (-want, +got):\n%s", diff)
	}
}

// TestRunFlushesOnStop shows that observations still queued when the
// server stops are posted once before Run returns: they were taken while
// the hooks drained.
func TestRunFlushesOnStop(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b observation.Batch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("cannot decode batch: %v", err)
		}
		for _, o := range b.Observations {
			got <- o.WorkspaceDeleted.Name
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c, err := New(srv.URL, Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.Send(obs(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before it ever ran
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	close(got)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{"ws-0", "ws-1", "ws-2"}, names); diff != "" {
		t.Errorf("observations posted on stop (-want, +got):\n%s", diff)
	}
	if c.Pending() != 0 {
		t.Errorf("Pending() = %d after the flush, want 0", c.Pending())
	}
}
