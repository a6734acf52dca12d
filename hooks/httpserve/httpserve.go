// Package httpserve is the one way this project serves HTTP: the hook
// server, the reporter sidecar and the reference Cluster Control all build
// their http.Server here, so they share the same timeouts, header and
// connection limits, error-body format, JSON content-type rule and
// shutdown.
package httpserve

import (
	"cmp"
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

	"github.com/formspec/formspec-hooks/hooks/internal/lograte"
	"github.com/go-chi/chi/v5"
)

// Config configures one HTTP server: its request limits, its connection
// caps, TLS and its shutdown. It is the one configuration of every server
// here; the zero value is a plain-HTTP server with every default below.
type Config struct {
	// ReadHeaderTimeout bounds reading the request headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body; the
	// body alone has BodyTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the answer. A handler that deliberately holds a request
	// longer (the reference Cluster Control's Delay fault) extends its own
	// deadlines with http.ResponseController.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
	// BodyTimeout bounds the time from the end of the request headers to
	// the end of the body, for every request that has one, whatever the
	// handler does with it (see guard).
	BodyTimeout time.Duration
	// MaxHeaderBytes bounds the request headers.
	MaxHeaderBytes int
	// Conns caps the listener's connections.
	Conns ConnLimits
	// TLS, when set, serves TLS; the certificate comes from the config
	// (GetCertificate), not from files.
	TLS *tls.Config
	// ShutdownTimeout bounds the wait for in-flight requests once the
	// server is told to stop.
	ShutdownTimeout time.Duration
	// Logger gets connection-level errors (failed TLS handshakes, requests
	// too broken to reach a handler), at most one line per kind and reason
	// every RefusalLogInterval; nil discards them.
	Logger *slog.Logger
	// Refused, when set, is called for every Refusal, so that the caller
	// can count them all (a metric); the log only samples them. It must
	// be quick and safe for concurrent use.
	Refused func(Refusal)
}

// RefusalLogInterval is the least time between two log lines about
// refusals of the same kind and reason: a client retrying a botched token
// or CA thousands of times a second writes one line every interval, with
// the count of those it stands for.
const RefusalLogInterval = 10 * time.Second

// Defaults is the one table of defaults: WithDefaults gives every zero
// field of a Config its value here.
//
// The largest body any of these servers takes is a few MiB (a hook
// request, a node-health batch), which crosses a cluster network in well
// under a second, and every client here gives up sooner (Metacontroller
// after its hook timeout, 10 s in compositecontrollers/, the reporter after
// 10 s, the hook server's hand-off after 2 s): the read and write timeouts
// only ever cut off a client that has stalled or is trickling bytes to
// hold a connection. The write timeout is twice the 30 s a CPU profile
// from serve --pprof takes by default: net/http/pprof refuses a profile
// that would outlast it. The idle timeout is longer than the 90 s that Go's
// HTTP clients (Metacontroller's among them) keep an idle connection, so
// the client, not the server, closes a connection it is done with, and
// never reuses one the server has just closed. The shutdown timeout plus
// the hook server's default --shutdown-delay (5 s) stays under the
// default 30 s termination grace period.
//
// Every client of these servers keeps a few connections (Metacontroller a
// few per controller worker, all from one address; the hook server's
// hand-off one or two), far below the connection caps, and each
// connection costs a goroutine and buffers.
var Defaults = Config{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       120 * time.Second,
	// Metacontroller sends at most a few MiB from inside the cluster,
	// which takes well under a second; a client still sending after 10 s
	// is trickling bytes to hold the connection.
	BodyTimeout: 10 * time.Second,
	// Ample for a bearer token and a few ETags.
	MaxHeaderBytes:  64 << 10,
	Conns:           ConnLimits{Max: 1024, PerClient: 256, Idle: 128},
	ShutdownTimeout: 20 * time.Second,
}

// WithDefaults returns c with its zero fields set from Defaults. A
// negative connection cap stays: it caps nothing.
func (c Config) WithDefaults() Config {
	d := Defaults
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, d.ReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, d.WriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, d.IdleTimeout)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, d.BodyTimeout)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, d.MaxHeaderBytes)
	c.Conns.Max = cmp.Or(c.Conns.Max, d.Conns.Max)
	c.Conns.PerClient = cmp.Or(c.Conns.PerClient, d.Conns.PerClient)
	c.Conns.Idle = cmp.Or(c.Conns.Idle, d.Conns.Idle)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, d.ShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// newServer returns an http.Server for h with every limit of cfg set, so a
// slow or hostile client cannot hold connections open. cfg has its
// defaults. TLS is not the http.Server's: listen does the handshakes.
func newServer(h http.Handler, cfg Config) *http.Server {
	return &http.Server{
		Handler:           guard(h, cfg.BodyTimeout),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// listen wraps ln for srv: the connection caps first, then the TLS
// handshake and the rewriting of Go's own error answers (connListener).
func listen(ln net.Listener, srv *http.Server, cfg Config) net.Listener {
	limiter := lograte.New(cfg.Logger, RefusalLogInterval)
	cl := &connListener{
		Listener: cfg.Conns.wrap(ln, srv),
		timeout:  cfg.ReadHeaderTimeout,
		refused: func(r Refusal, err error) {
			if cfg.Refused != nil {
				cfg.Refused(r)
			}
			limiter.Log(context.Background(), r.Kind+"/"+r.Reason, slog.LevelWarn, "refused below the handlers",
				"kind", r.Kind, "reason", r.Reason, "err", err.Error())
		},
	}
	if cfg.TLS != nil {
		cl.tls = tlsForServing(cfg.TLS)
	}
	return cl
}

// ErrCut, given as the cause when ctx is cancelled
// (context.WithCancelCause), makes Serve close the listener and every
// connection at once instead of letting in-flight requests finish: what an
// outage looks like to a client. The reference Cluster Control plays
// "down" with it.
var ErrCut = errors.New("connections cut")

// Serve serves h on ln until ctx ends, then stops accepting and lets
// in-flight requests finish for at most cfg.ShutdownTimeout (unless ctx
// ended with ErrCut). A server closed by its own shutdown is a clean exit
// (nil); a listener that fails before ctx ends is an error. It is the one
// serve loop of every binary here.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cfg Config) error {
	cfg = cfg.WithDefaults()
	srv := newServer(h, cfg)
	ln = listen(ln, srv, cfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	if errors.Is(context.Cause(ctx), ErrCut) {
		_ = srv.Close()
		<-errc
		return nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("cannot finish in-flight requests on %s within %s: %w", ln.Addr(), cfg.ShutdownTimeout, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

// NewRouter returns the router every server here mounts its routes on:
// chi, answering an unknown path with 404 and a known path with another
// method with 405, both in the error format.
func NewRouter() chi.Router {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, http.StatusNotFound, "no such endpoint")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
	})
	return r
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
// Cluster Control's; the hook API answers 400, which Metacontroller
// copies into an Event on the object, and has
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
