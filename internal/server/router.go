package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/go-chi/chi/v5"
)

// Route is one hook endpoint; HookRoute makes one. Name labels its metrics
// and log lines, so it is stable and unique (e.g. "workspace-sync").
type Route struct {
	Method string
	Path   string
	Name   string
	// handler builds the route's handler with the server's limits, so
	// that every hook gets them from the one Config.
	handler func(cfg *Config) http.Handler
}

// HookRoute routes POST path to hook h. The hook's name, which labels its
// metrics and log lines, is the path without its leading /v1/, with dashes
// for slashes: "/v1/workspace/sync" is "workspace-sync".
func HookRoute[Req, Resp any](path string, h Hook[Req, Resp]) Route {
	name := strings.ReplaceAll(strings.TrimPrefix(path, "/v1/"), "/", "-")
	return Route{Method: http.MethodPost, Path: path, Name: name, handler: func(cfg *Config) http.Handler {
		return &hookHandler[Req, Resp]{name: name, hook: h, maxObjects: cfg.MaxObjects, logger: cfg.Logger}
	}}
}

// Health answers the liveness and readiness probes. Readiness fails once
// draining starts, so that the endpoints controller takes the pod out of the
// Service before the listener closes, and while a credentials file is
// broken, so that a replica that refuses every caller leaves the Service.
type Health struct {
	draining atomic.Bool
	files    []Credential
}

// Credential is a file the server needs in order to serve, such as a
// *filereload.Tokens.
type Credential interface {
	// Name identifies the file in probes and metrics; never secret.
	Name() string
	// Err is nil while the file loads.
	Err() error
}

// StartDraining makes /readyz fail from now on, and every hook answer
// close its connection (closeWhileDraining).
func (h *Health) StartDraining() { h.draining.Store(true) }

// closeWhileDraining answers with "Connection: close" once draining has
// started, and Go's server then closes the connection after the answer.
// kube-proxy sends a kept-alive connection on to its pod after the pod has
// left the Service's endpoints, so Metacontroller goes on using its
// connections to a draining pod. Were they still open when the listener
// closes, each idle one would be closed under a request that Metacontroller
// may be writing at that moment; it does not retry a POST, so that hook
// call would fail. A client reads "Connection: close" before it can reuse
// the connection, so a connection closed that way never loses a request:
// the next one opens a connection to a pod that is not draining. Only a
// connection that stays idle through the whole delay is left for the
// listener to close.
func (h *Health) closeWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Ready reports whether the server still wants new requests, and if not,
// why.
func (h *Health) Ready() error {
	if h.draining.Load() {
		return errors.New("shutting down")
	}
	for _, f := range h.files {
		if f.Err() != nil {
			// The name only: the error may name a path, and probes are
			// unauthenticated.
			return fmt.Errorf("credentials file %s is broken", f.Name())
		}
		// A file can load and still be unfit to serve, such as an expired
		// serving certificate; such an error is written for the probe.
		if r, ok := f.(interface{ Ready() error }); ok {
			if err := r.Ready(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *Health) mount(r chi.Router) {
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeText(w, http.StatusOK, "ok")
	})
}

// newRouter mounts cfg's routes, each behind logging, metrics, panic
// recovery, authentication, body reading and the in-flight limit (in that
// order, so that rejected and failed requests are still logged and counted,
// nothing is read for a caller without a token, and a slot is taken only
// for the hook's own work). The probes are not here: they answer on the
// metrics listener only (Server.MetricsHandler). cfg has its defaults.
func newRouter(cfg Config) (http.Handler, error) {
	var slots chan struct{}
	if cfg.MaxInFlight > 0 {
		slots = make(chan struct{}, cfg.MaxInFlight)
	}
	budget := newByteBudget(cfg.MaxInFlightBytes, cfg.Metrics)
	reqLog := newRequestLog(cfg.Logger)

	r := httpserve.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such hook")
	})

	seen := map[string]bool{}
	for _, rt := range cfg.Routes {
		if err := checkRoute(rt); err != nil {
			return nil, err
		}
		key := rt.Method + " " + rt.Path
		if seen[key] || seen["name "+rt.Name] {
			return nil, fmt.Errorf("route %s (%s) is defined twice", key, rt.Name)
		}
		seen[key], seen["name "+rt.Name] = true, true

		h := rt.handler(&cfg)
		h = limitInFlight(slots, h)
		h = readBody(cfg.MaxBodyBytes, budget, h)
		if cfg.Tokens != nil {
			h = requireToken(cfg.Tokens, cfg.Metrics.refusals.auth, h)
		}
		h = recoverPanics(rt.Name, cfg.Logger, cfg.Metrics, h)
		h = instrument(rt.Name, reqLog, cfg.Metrics, h)
		r.Method(rt.Method, rt.Path, h)
	}
	return r, nil
}

func checkRoute(rt Route) error {
	switch {
	case rt.Name == "":
		return fmt.Errorf("route %s %s has no name", rt.Method, rt.Path)
	case rt.handler == nil:
		return fmt.Errorf("route %q has no handler (make routes with HookRoute)", rt.Name)
	case !strings.HasPrefix(rt.Path, "/"):
		return fmt.Errorf("route %q: path %q must start with /", rt.Name, rt.Path)
	}
	switch rt.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return nil
	}
	return fmt.Errorf("route %q: unsupported method %q", rt.Name, rt.Method)
}

// limitInFlight answers 429 instead of queueing when every slot is taken: a
// queued hook request would likely outlive Metacontroller's hook timeout,
// while a 429 makes it retry with backoff.
func limitInFlight(slots chan struct{}, next http.Handler) http.Handler {
	if slots == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "too many requests in flight")
		}
	})
}

// recoverPanics turns a panic into a counted, logged 500, so that one bad
// object cannot take the replica down for every other workspace.
func recoverPanics(name string, logger *slog.Logger, m *Metrics, next http.Handler) http.Handler {
	if m != nil {
		// Export 0 from the start, so that an alert on an increase sees
		// the first panic and not only the second.
		m.panics.WithLabelValues(name)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := w.(*recorder)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				// net/http's own way to abort a response; it must reach
				// the server to close the connection quietly.
				panic(v)
			}
			if m != nil {
				m.panics.WithLabelValues(name).Inc()
			}
			// The panic value and stack point at the bug; the request body
			// stays out of the log.
			logger.ErrorContext(r.Context(), "panic serving hook", "hook", name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if rec == nil || !rec.wroteHeader {
				writeError(w, http.StatusInternalServerError, "internal error in hook "+name)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// instrument logs one line and records metrics per request. The line has no
// headers and no bodies: Authorization carries a token and bodies carry
// Secrets.
func instrument(name string, reqLog *requestLog, m *Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body := &countingReader{r: r.Body}
		r.Body = body
		rec := &recorder{ResponseWriter: w}
		if m != nil {
			m.inFlight.Inc()
			defer m.inFlight.Dec()
		}

		next.ServeHTTP(rec, r)

		code := rec.status()
		elapsed := time.Since(start)
		if m != nil {
			m.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
			m.duration.WithLabelValues(name).Observe(elapsed.Seconds())
			m.size.WithLabelValues(name).Observe(float64(requestSize(r, body.n)))
		}
		reqLog.log(r.Context(), name, code,
			"hook", name,
			"method", r.Method,
			"path", r.URL.Path,
			"code", code,
			"duration", elapsed,
			"requestBytes", requestSize(r, body.n),
			"responseBytes", rec.bytes,
		)
	})
}

// recorder remembers what was written so that logs and metrics can report
// it.
type recorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
	bytes       int64
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if !r.wroteHeader {
		// A handler that writes nothing answers 200 with an empty body.
		return http.StatusOK
	}
	return r.code
}

// requestSize prefers Content-Length, so that a body rejected unread (wrong
// content type, over the limit) is still measured as sent; a chunked body
// is measured as far as it was read.
func requestSize(r *http.Request, read int64) int64 {
	if r.ContentLength >= 0 {
		return r.ContentLength
	}
	return read
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}
