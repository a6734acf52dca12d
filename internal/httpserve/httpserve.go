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

	"github.com/formspec/formspec-hooks/internal/lograte"
	"github.com/go-chi/chi/v5"
)

// Config configures one HTTP server: its request limits, its connection
// caps, TLS and its shutdown. It is the one configuration of every server
// here; the zero value is a plain-HTTP server with every default below.
type Config struct {
	// ReadHeaderTimeout bounds reading the request headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is net/http's bound on reading a request from its first
	// byte. It does not bound a body: once the headers are in, guard
	// replaces that deadline with BodyTimeout for a request with a body,
	// so in effect it bounds only what precedes the handler.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the answer. A handler that deliberately holds a request
	// longer (the reference Cluster Control's Delay fault) extends its own
	// deadlines with http.ResponseController.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request (HTTP/2: with no request in progress).
	IdleTimeout time.Duration
	// MaxConnAge bounds how long one connection carries requests: the
	// first answer after the connection has been open that long closes
	// it (HTTP/1.1: "Connection: close"; HTTP/2: GOAWAY, after which the
	// requests the client has already sent finish, and its next ones go
	// to a new connection). A negative age retires no connection.
	MaxConnAge time.Duration
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
// The maximum connection age spreads a client's requests over the
// replicas behind a Service: kube-proxy picks a replica per connection,
// not per request, and over HTTP/2 Metacontroller keeps one connection
// per hook for as long as it runs, so without an age every call of a hook
// would go to the replica its connection reached first, and a replica
// added later, or started by a rollout after the others, would get no
// calls over connections opened before it. Retiring a connection costs
// its client a TLS handshake, or one per worker that calls the hook
// while the new connection is being made (at most 5, Metacontroller's
// default --workers): for the 9 connections Metacontroller keeps (one
// per hook of compositecontrollers/) at most 45 handshakes in 5 minutes,
// under 5 per 1,000 calls from a fleet of 1,000 Workspaces (2,070 hook
// calls a minute, docs/install.md), and every busy hook's connection
// reaches a new replica as often as any other within 5 minutes.
//
// Every client of these servers keeps a few connections (Metacontroller
// one per hook over HTTP/2, all from one address; the hook server's
// hand-off one or two), far below the connection caps, and each
// connection costs a goroutine and buffers.
var Defaults = Config{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       120 * time.Second,
	MaxConnAge:        5 * time.Minute,
	// Metacontroller sends at most a few MiB from inside the cluster,
	// which takes well under a second; a client still sending after 10 s
	// is trickling bytes to hold the connection.
	BodyTimeout: 10 * time.Second,
	// Ample for a bearer token and a few ETags.
	MaxHeaderBytes: 64 << 10,
	// 32 streams carry Metacontroller's calls to one hook (at most its
	// --workers, 5 by default, at once) on one connection, with room for
	// raised --workers before it opens a second.
	Conns:           ConnLimits{Max: 1024, PerClient: 256, Idle: 128, Streams: 32},
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
	c.MaxConnAge = cmp.Or(c.MaxConnAge, d.MaxConnAge)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, d.BodyTimeout)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, d.MaxHeaderBytes)
	c.Conns.Max = cmp.Or(c.Conns.Max, d.Conns.Max)
	c.Conns.PerClient = cmp.Or(c.Conns.PerClient, d.Conns.PerClient)
	c.Conns.Idle = cmp.Or(c.Conns.Idle, d.Conns.Idle)
	c.Conns.Streams = cmp.Or(c.Conns.Streams, d.Conns.Streams)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, d.ShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// HTTP/2 limits that are not Config's: what one connection may hold in
// buffers the client fills.
const (
	// http2FrameSize is the largest frame the server reads, the
	// protocol's minimum: Go's server keeps a buffer the size of the
	// largest frame a connection has sent, for as long as the connection
	// lives (1 MiB with Go's default), and a hook request of a few MiB
	// needs no larger frames.
	http2FrameSize = 16 << 10
	// http2Window is the flow-control window of a connection, and of each
	// of its streams: the request bytes the server accepts before a
	// handler has read them. What a handler has read is counted by its
	// own budget (the hook server's in-flight bytes); this is what no
	// budget sees, so it is the least the protocol allows, 64 KiB, about
	// what Linux buffers for a TCP connection whose reader waits (half of
	// tcp_rmem's default 128 KiB), and so what an HTTP/1.1 connection
	// held unread. Go's default is 1 MiB. At 64 KiB per round trip, a
	// body of 8 MiB crosses a cluster network (well under a millisecond
	// a round trip) in well under a second.
	http2Window = 64 << 10
)

// listener is one listener being served: its http.Server and the wrapped
// net.Listener it serves on.
type listener struct {
	srv *http.Server
	ln  net.Listener
}

// newListener wraps ln for h with every limit of cfg (which has its
// defaults): the connection caps first, then the TLS handshake and the
// rewriting of Go's own error answers (connListener); guard in front of h.
// TLS is not the http.Server's: connListener does the handshakes.
func newListener(ln net.Listener, h http.Handler, cfg Config) listener {
	logLimiter := lograte.New(cfg.Logger, RefusalLogInterval)
	refused := func(r Refusal, err error) {
		if cfg.Refused != nil {
			cfg.Refused(r)
		}
		logLimiter.Log(context.Background(), r.Kind+"/"+r.Reason, slog.LevelWarn, "refused below the handlers",
			"kind", r.Kind, "reason", r.Reason, "err", err.Error())
	}
	c := newCaps(cfg.Conns)
	srv := newServer(h, cfg, c, refused)
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		tlsCfg = tlsForServing(cfg.TLS)
	}
	return listener{srv: srv, ln: newConnListener(c.listener(ln), tlsCfg, cfg.ReadHeaderTimeout, refused)}
}

// newServer returns an http.Server for h with every limit of cfg set, so a
// slow or hostile client cannot hold connections open. cfg has its
// defaults; c counts HTTP/2 requests against the caps (nil: none), and
// refused hears of every Refusal (nil: nobody).
func newServer(h http.Handler, cfg Config, c *caps, refused func(Refusal, error)) *http.Server {
	if refused == nil {
		refused = func(Refusal, error) {}
	}
	g := guardConfig{bodyTimeout: cfg.BodyTimeout, maxAge: cfg.MaxConnAge, caps: c, refused: refused}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	// Only on connections that chose it by ALPN (connListener), never in
	// plain text.
	protocols.SetHTTP2(true)
	return &http.Server{
		Handler:           guard(h, g),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		ConnContext:       connContext,
		ConnState:         newConnStates(cfg.Conns.Idle, cfg.ReadHeaderTimeout).track,
		Protocols:         &protocols,
		// Go's HTTP/2 server applies ReadTimeout and WriteTimeout to
		// every stream, MaxHeaderBytes to every header block, and
		// IdleTimeout to a connection without streams; guard applies
		// BodyTimeout to every stream.
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          cfg.Conns.Streams,
			MaxReadFrameSize:              http2FrameSize,
			MaxReceiveBufferPerConnection: http2Window,
			MaxReceiveBufferPerStream:     http2Window,
			// A client that stops reading holds its connection no
			// longer than WriteTimeout holds an HTTP/1.1 one.
			WriteByteTimeout: cfg.WriteTimeout,
			CountError: func(errType string) {
				g.refused(Refusal{Kind: RefusedHTTP2, Reason: strings.ToLower(errType)}, errors.New("HTTP/2 error "+errType))
			},
		},
	}
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
	l := newListener(ln, h, cfg)
	srv, ln := l.srv, l.ln
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
