package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
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

func status(i int) observation.Observation {
	return observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "ns", Name: fmt.Sprintf("ws-%d", i), Phase: "Ready"}}
}

// names decodes the queued observations' workspace names, in order.
func names(t *testing.T, qs []queued) []string {
	t.Helper()
	var out []string
	for _, q := range qs {
		var o observation.Observation
		if err := json.Unmarshal(q.raw, &o); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Workspace != nil:
			out = append(out, o.Workspace.Name)
		case o.WorkspaceDeleted != nil:
			out = append(out, "deleted "+o.WorkspaceDeleted.Name)
		}
	}
	return out
}

// TestSendNeverBlocks sends far more than the queue holds while the sidecar
// is unreachable: every Send returns, the overflow is counted, and the
// queue stays within its bounds.
func TestSendNeverBlocks(t *testing.T) {
	const queue, sends = 4, 1000
	for name, run := range map[string]bool{"NoSender": false, "SidecarDown": true} {
		t.Run(name, func(t *testing.T) {
			c, err := New(closedURL(t), Options{QueueSize: queue, RetryDelay: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if run {
				go func() { _ = c.Run(ctx) }()
			}
			for i := range sends {
				c.Send(status(i))
			}
			// A failed batch stays queued, so nothing leaves the queue but
			// what is dropped.
			if got, want := c.Dropped(), uint64(sends-queue); got != want {
				t.Errorf("Dropped() = %d, want %d", got, want)
			}
			if got := c.Pending(); got != queue {
				t.Errorf("Pending() = %d, want the queue size %d", got, queue)
			}
		})
	}
}

// TestEvictionKeepsDeletions checks which observations survive an overflow:
// the newest, except that a deletion outlives newer statuses, since nothing
// later repairs a lost deletion.
func TestEvictionKeepsDeletions(t *testing.T) {
	c, err := New("http://127.0.0.1:1", Options{QueueSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Send(status(0))
	c.Send(obs(1))
	for i := 2; i < 10; i++ {
		c.Send(status(i))
	}
	if diff := cmp.Diff([]string{"deleted ws-1", "ws-8", "ws-9"}, names(t, c.peek())); diff != "" {
		t.Errorf("queued after overflow (-want, +got):\n%s", diff)
	}
}

// TestQueueBytes shows the queue bounded by encoded size as well as count.
func TestQueueBytes(t *testing.T) {
	one, err := json.Marshal(status(100))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New("http://127.0.0.1:1", Options{QueueSize: 1000, QueueBytes: 5 * len(one)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		c.Send(status(100 + i))
	}
	if got := c.PendingBytes(); got > 5*len(one) {
		t.Errorf("PendingBytes() = %d, want at most %d", got, 5*len(one))
	}
	if got := c.Pending(); got != 5 {
		t.Errorf("Pending() = %d, want 5", got)
	}
}

// sidecar is a fake reporter that records the names it accepted and answers
// with what fail says.
func sidecar(t *testing.T, fail func(b observation.Batch) int) (*httptest.Server, chan string) {
	got := make(chan string, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b observation.Batch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("cannot decode batch: %v", err)
		}
		if code := fail(b); code != 0 {
			w.WriteHeader(code)
			return
		}
		for _, o := range b.Observations {
			if o.WorkspaceDeleted != nil {
				got <- "deleted " + o.WorkspaceDeleted.Name
			} else {
				got <- o.Workspace.Name
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func receive(t *testing.T, got chan string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		select {
		case s := <-got:
			out = append(out, s)
		case <-time.After(20 * time.Second):
			t.Fatalf("gave up waiting after %v", out)
		}
	}
	return out
}

// TestFailedBatchIsKept shows a deletion handed over while the sidecar is
// down reaching it once it is back: the failed batch is posted again.
func TestFailedBatchIsKept(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv, got := sidecar(t, func(observation.Batch) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	c, err := New(srv.URL, Options{RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	c.Send(obs(1))
	c.Send(status(2))
	waitPosted(t, c, "error")
	down.Store(false)
	if diff := cmp.Diff([]string{"deleted ws-1", "ws-2"}, receive(t, got, 2)); diff != "" {
		t.Errorf("received after the outage (-want, +got):\n%s", diff)
	}
	if c.Dropped() != 0 {
		t.Errorf("Dropped() = %d, want 0", c.Dropped())
	}
}

// TestFailureLogsAreRateLimited shows a sidecar that stays down logged
// once, not once per retry, and its recovery logged once.
func TestFailureLogsAreRateLimited(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv, got := sidecar(t, func(observation.Batch) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	var logs testsync.Buffer
	c, err := New(srv.URL, Options{RetryDelay: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	c.Send(status(1))
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(c.posted.WithLabelValues("error")) < 20 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 20 failed posts")
		}
		time.Sleep(time.Millisecond)
	}
	down.Store(false)
	receive(t, got, 1)
	// The recovery line follows the delivery it reports.
	for !strings.Contains(logs.String(), "again") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	want := map[string]int{"cannot hand observations": 1, "handing observations to the reporter again": 1}
	gotCounts := map[string]int{}
	for msg := range want {
		gotCounts[msg] = strings.Count(logs.String(), msg)
	}
	if diff := cmp.Diff(want, gotCounts); diff != "" {
		t.Errorf("log lines (-want, +got):\n%s\n%s", diff, logs.String())
	}
}

// TestFailureLogNamesOrigin shows the log line of a post to a sidecar
// that is not there naming it by scheme and host alone: Go's client error
// quotes the whole URL, and no URL's path is logged.
func TestFailureLogNamesOrigin(t *testing.T) {
	origin := closedURL(t)
	var logs testsync.Buffer
	c, err := New(origin+"/sidecar-3f9c", Options{RetryDelay: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	c.Send(status(1))
	testsync.WaitFor(t, "a failed post to be logged", func() bool { return strings.Contains(logs.String(), "cannot hand observations") })
	line := logs.String()
	if !strings.Contains(line, `\"`+origin+`\"`) {
		t.Errorf("log does not name the sidecar as %s:\n%s", origin, line)
	}
	for _, path := range []string{"sidecar-3f9c", observation.PathObservations} {
		if strings.Contains(line, path) {
			t.Errorf("log repeats %q of the URL's path:\n%s", path, line)
		}
	}
}

func waitPosted(t *testing.T, c *Client, result string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for testutil.ToFloat64(c.posted.WithLabelValues(result)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no batch posted with result %q", result)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRefusedBatchIsSplit shows a batch the sidecar refuses as too large
// split and delivered in parts, and the one observation it cannot take
// dropped alone.
func TestRefusedBatchIsSplit(t *testing.T) {
	srv, got := sidecar(t, func(b observation.Batch) int {
		for _, o := range b.Observations {
			if o.Workspace != nil && o.Workspace.Name == "ws-5" {
				return http.StatusRequestEntityTooLarge
			}
		}
		if len(b.Observations) > 3 {
			return http.StatusRequestEntityTooLarge
		}
		return 0
	})
	c, err := New(srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c.Send(status(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	want := []string{"ws-0", "ws-1", "ws-2", "ws-3", "ws-4", "ws-6", "ws-7", "ws-8", "ws-9"}
	if diff := cmp.Diff(want, receive(t, got, len(want))); diff != "" {
		t.Errorf("received (-want, +got):\n%s", diff)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Pending() != 0 || c.Dropped() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Pending() = %d, Dropped() = %d; want 0 and 1", c.Pending(), c.Dropped())
		}
		time.Sleep(time.Millisecond)
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
