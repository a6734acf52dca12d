package reporter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
)

// startCC runs a reference Cluster Control on a loopback port.
func startCC(t *testing.T, opts clustercontrol.Options) (*clustercontrol.Server, string) {
	t.Helper()
	srv := clustercontrol.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reference cluster control: %v", err)
		}
	})
	return srv, "http://" + ln.Addr().String()
}

// fastConfig is a Config whose every interval is short, so tests that run
// the real loops finish quickly.
func fastConfig(url string) Config {
	return Config{
		ClusterControlURL:    url,
		Reporter:             "reporter-0",
		NodeHealthInterval:   5 * time.Millisecond,
		DeployStatusInterval: 5 * time.Millisecond,
		RequestTimeout:       time.Hour,
		BackoffBase:          time.Millisecond,
		BackoffMax:           5 * time.Millisecond,
		// Stale windows are wide: loops run every few milliseconds here.
		NodeStaleIntervals: 1 << 20,
		PodStaleAfter:      time.Hour,
		// A workspace may restart or idle again at once: the budget's
		// tests set the interval they are about.
		RestartBudget: Budget{MinInterval: time.Nanosecond},
		IdleBudget:    Budget{MinInterval: time.Nanosecond},
	}
}

func newReporter(t *testing.T, cfg Config) *Reporter {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// runLoops runs the given loops of r until the test ends.
func runLoops(t *testing.T, loops ...func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { l(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func wsObs(ns, name, phase string, ready int32, hash string) observation.Observation {
	return observation.Observation{Workspace: &observation.WorkspaceStatus{
		Namespace: ns, Name: name,
		ClusterClass: "standard", Phase: phase,
		Replicas: 2, ReadyReplicas: ready, UpdatedReplicas: ready, ArtifactHash: hash,
	}}
}

// eventLog orders what Cluster Control answered against what the reporter
// slept, from both sides of the connection.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// logWriter records a response's status when it is written, which happens
// before the client can read it, so the log order is the causal order.
type logWriter struct {
	http.ResponseWriter
	log *eventLog
	r   *http.Request
}

func (w *logWriter) WriteHeader(code int) {
	w.log.add("%s %s %d", w.r.Method, w.r.URL.Path, code)
	w.ResponseWriter.WriteHeader(code)
}

func logged(h http.Handler, log *eventLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&logWriter{ResponseWriter: w, log: log, r: r}, r)
	})
}

func ptr[T any](v T) *T { return &v }

// digest is the n-th well-formed artifact hash: "sha256:" and 64 hex
// digits, as the reporter requires of a restart.
func digest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func wsName(i int) string { return fmt.Sprintf("ws-%02d", i) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
