// Package httpserve is the one way this project serves HTTP: the hook
// server, the reporter sidecar and the reference Cluster Control all build
// their http.Server here, so they share the same timeouts, header and
// connection limits, error-body format, JSON content-type rule and
// shutdown.
package httpserve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
)

// Default limits. The largest body any of these servers takes is a few MiB
// (a hook request, a node-health batch), which crosses a cluster network in
// well under a second, and every client here gives up sooner (the
// reporter after 10s, the hook server's hand-off after 2s, Metacontroller
// after its hook timeout): the read and write timeouts only ever cut off a
// client that has stalled or is trickling bytes to hold a connection.
const (
	// DefaultReadHeaderTimeout bounds reading the request headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing the answer.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout lets a client reuse a connection between calls
	// without the server keeping dead ones forever.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes is ample for a bearer token and a few ETags.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultShutdownTimeout bounds the wait for in-flight requests.
	DefaultShutdownTimeout = 10 * time.Second
)

// Timeouts bound one request. Zero fields take the defaults.
type Timeouts struct {
	// ReadHeader bounds reading the request headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body. A handler
	// that wants a tighter bound on the body sets its own read deadline
	// (see BodyDeadline).
	Read time.Duration
	// Write bounds the time from the end of the request headers to the end
	// of the answer. A handler that deliberately holds a request longer
	// (the reference Cluster Control's Delay fault) extends its own
	// deadlines with http.ResponseController.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// WithDefaults returns t with its zero fields set to the defaults.
func (t Timeouts) WithDefaults() Timeouts {
	t.ReadHeader = positiveOr(t.ReadHeader, DefaultReadHeaderTimeout)
	t.Read = positiveOr(t.Read, DefaultReadTimeout)
	t.Write = positiveOr(t.Write, DefaultWriteTimeout)
	t.Idle = positiveOr(t.Idle, DefaultIdleTimeout)
	return t
}

// Config is one listener's limits and lifecycle. The zero value is a
// plain-HTTP server with every default limit.
type Config struct {
	Timeouts
	// MaxHeaderBytes bounds the request headers; zero takes the default.
	MaxHeaderBytes int
	// Conns caps connections; zero fields take the defaults.
	Conns ConnLimits
	// TLS, when set, serves TLS; the certificate comes from the config
	// (GetCertificate), not from files.
	TLS *tls.Config
	// ShutdownTimeout bounds the wait for in-flight requests once ctx
	// ends; zero takes the default.
	ShutdownTimeout time.Duration
	// Logger gets connection-level errors (failed TLS handshakes, refused
	// connections); nil discards them.
	Logger *slog.Logger
}

// NewServer returns an http.Server for h with header, read, write, idle and
// header-size limits set, so a slow or hostile client cannot hold
// connections open.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	return newServer(h, Config{Timeouts: t})
}

func newServer(h http.Handler, cfg Config) *http.Server {
	t := cfg.Timeouts.WithDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    positiveOr(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes),
		TLSConfig:         cfg.TLS,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Run serves h on ln with the default limits until ctx ends, then lets
// in-flight requests finish for at most grace; see Serve.
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	return Serve(ctx, ln, h, Config{ShutdownTimeout: grace})
}

// Serve serves h on ln until ctx ends, then stops accepting and lets
// in-flight requests finish for at most cfg.ShutdownTimeout. A server
// closed by its own shutdown is a clean exit (nil); a listener that fails
// before ctx ends is an error.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cfg Config) error {
	srv := newServer(h, cfg)
	ln = cfg.Conns.WithDefaults().wrap(ln, srv)
	errc := make(chan error, 1)
	go func() {
		if cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	grace := positiveOr(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("cannot finish in-flight requests on %s within %s: %w", ln.Addr(), grace, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

// BodyDeadline bounds the time left to read r's body, separately from the
// server's read timeout, so that a client trickling a body cannot hold the
// request for the whole read timeout. It reports whether the connection
// supports deadlines (an httptest.ResponseRecorder does not).
func BodyDeadline(w http.ResponseWriter, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	return http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)) == nil
}

// IsJSON is the one content-type rule of every JSON API here:
// application/json, with any parameters (charset=utf-8 is what most clients
// add) and in any letter case.
func IsJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

// ContentLengthOver reports whether r announces a body longer than limit.
// Checking it before reading matters: Go's server answers
// "Expect: 100-continue" with 100 Continue when the handler first reads the
// body, so a refusal after reading would invite the client to send it all.
func ContentLengthOver(r *http.Request, limit int64) bool {
	return r.ContentLength > limit
}

// ReadJSON reads a JSON request body of at most limit bytes for an API that
// answers 415 to another content type (the reporter's localhost API and
// Cluster Control's; the hook API answers 400, as SPEC §5 says, and has
// its own reader). When the body cannot be had, ReadJSON has answered in
// the error format and returns false.
func ReadJSON(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if !IsJSON(r.Header.Get("Content-Type")) {
		WriteError(w, http.StatusUnsupportedMediaType, "content type must be application/json")
		return nil, false
	}
	if ContentLengthOver(r, limit) {
		WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
			return nil, false
		}
		WriteError(w, http.StatusBadRequest, "cannot read request body")
		return nil, false
	}
	return body, true
}

// ErrorBody is the one error-body format of every server here, as
// docs/cluster-control-api.yaml defines it: {"error": "<one stable line>"}.
// The line never quotes the request (a request may carry Secrets) and never
// carries Go error details that change from call to call, because
// Metacontroller copies a failed hook's body into an Event.
type ErrorBody struct {
	Error string `json:"error"`
}

// WriteError answers code with msg, folded into one line, in ErrorBody
// format.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, ErrorBody{Error: strings.Join(strings.Fields(msg), " ")})
}

// WriteJSON answers code with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a bug gets here: every value passed is a plain struct.
		code, body = http.StatusInternalServerError, []byte(`{"error":"cannot encode answer"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
