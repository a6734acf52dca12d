package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

// Defaults for Config fields left at zero.
const (
	// DefaultShutdownDelay is how long readiness fails before the listener
	// closes: long enough for the endpoints controller to see the failed
	// probe and for kube-proxy to stop sending new connections.
	DefaultShutdownDelay = 5 * time.Second
	// DefaultShutdownTimeout bounds the wait for in-flight hooks. With the
	// delay it stays under the default 30 s termination grace period.
	DefaultShutdownTimeout = 20 * time.Second
	// DefaultReadTimeout covers reading a request, headers and body; the
	// body alone has BodyTimeout.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is well past Metacontroller's hook timeout, so it
	// only ever cuts off a client that stopped reading.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout lets Metacontroller reuse connections between
	// resyncs without keeping dead ones forever.
	DefaultIdleTimeout = 120 * time.Second
)

// Config configures a Server. Zero durations and sizes take the defaults
// above or httpserve's, except ShutdownDelay and the in-flight bounds.
type Config struct {
	// Addr is the hook listener's address, e.g. ":8080".
	Addr string
	// MetricsAddr is the address of the separate listener for /metrics and
	// the probes, the only listener that answers them. It is never behind
	// TLS client verification or tokens, so that the kubelet and
	// Prometheus can reach it; keep it off the Service Metacontroller uses.
	MetricsAddr string

	// Routes are the hook endpoints.
	Routes []Route
	// Logger gets request lines and lifecycle events; nil discards.
	Logger *slog.Logger
	// Metrics is where requests are counted; nil creates a new set.
	Metrics *Metrics
	// Tokens, when set, is required on hook routes.
	Tokens *filereload.Tokens
	// TLS, when set, serves the hook listener over TLS (see TLSConfig).
	TLS *tls.Config
	// Credentials are the files the server depends on besides Tokens (the
	// TLS files): while one is broken, /readyz fails and
	// formspec_hooks_credentials_file_ok is 0.
	Credentials []Credential
	// MaxInFlight bounds hook requests being worked on; zero means no
	// bound. See RouterConfig.
	MaxInFlight int
	// MaxInFlightBytes bounds the request bodies held at once; zero means
	// no bound. See RouterConfig.
	MaxInFlightBytes int64
	// MaxBodyBytes bounds one body; zero takes DefaultMaxBodyBytes. The
	// hooks' own Handler limit should be the same.
	MaxBodyBytes int64
	// BodyTimeout bounds reading one body; zero takes DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Conns caps each listener's connections; zero fields take
	// httpserve's defaults.
	Conns httpserve.ConnLimits
	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics
	// listener. Off by default: profiles expose internals to anyone who
	// can reach that port, and a CPU profile costs CPU while it runs.
	Pprof bool

	// ShutdownDelay is how long readiness fails before the listeners close.
	// Unlike the other fields, zero means no delay (tests want that);
	// production wants DefaultShutdownDelay or more.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests.
	ShutdownTimeout time.Duration

	// The limits of both listeners; see the Default constants here and in
	// httpserve for why each value.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// Server serves hooks on one listener and metrics and probes on another.
type Server struct {
	cfg     Config
	health  *Health
	hooks   http.Handler
	metrics http.Handler
}

// New validates the routes and builds the handlers; nothing listens until
// Run or Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	setDefault(&cfg.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&cfg.ReadTimeout, DefaultReadTimeout)
	setDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)

	files := slices.Clone(cfg.Credentials)
	if cfg.Tokens != nil {
		files = append(files, cfg.Tokens)
	}
	if err := cfg.Metrics.watchCredentials(files); err != nil {
		return nil, err
	}
	health := &Health{files: files}
	hooks, err := NewRouter(cfg.Routes, RouterConfig{
		Logger:           cfg.Logger,
		Metrics:          cfg.Metrics,
		Tokens:           cfg.Tokens,
		MaxInFlight:      cfg.MaxInFlight,
		MaxInFlightBytes: cfg.MaxInFlightBytes,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		BodyTimeout:      cfg.BodyTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot build hook routes: %w", err)
	}
	metrics := chi.NewRouter()
	health.mount(metrics)
	metrics.Method(http.MethodGet, "/metrics", cfg.Metrics.Handler())
	if cfg.Pprof {
		mountPprof(metrics)
	}

	return &Server{cfg: cfg, health: health, hooks: hooks, metrics: metrics}, nil
}

// Handler is the hook listener's handler.
func (s *Server) Handler() http.Handler { return s.hooks }

// MetricsHandler is the metrics listener's handler: /metrics, /healthz,
// /readyz.
func (s *Server) MetricsHandler() http.Handler { return s.metrics }

// Run listens on the configured addresses and serves until ctx is done; see
// Serve.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	hookLn, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen for hooks: %w", err)
	}
	metricsLn, err := lc.Listen(ctx, "tcp", s.cfg.MetricsAddr)
	if err != nil {
		_ = hookLn.Close()
		return fmt.Errorf("cannot listen for metrics: %w", err)
	}
	return s.Serve(ctx, hookLn, metricsLn)
}

// Serve serves hooks on hookLn and metrics on metricsLn until ctx is done,
// then drains: readiness fails at once, new requests are still served for
// ShutdownDelay while the pod leaves the Service's endpoints, and then the
// hook listener closes and in-flight requests get up to ShutdownTimeout to
// finish. The metrics listener closes last, so the drain can be watched. It
// returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, hookLn, metricsLn net.Listener) error {
	hookCfg := s.listenerConfig()
	hookCfg.TLS = s.cfg.TLS
	// The metrics listener has the same caps: it has no authentication, so
	// anyone who can reach the pod can open connections to it.
	metricsCfg := s.listenerConfig()

	hookCtx, stopHooks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHooks()
	metricsCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMetrics()
	hookDone, metricsDone := make(chan error, 1), make(chan error, 1)
	go func() { hookDone <- httpserve.Serve(hookCtx, hookLn, s.hooks, hookCfg) }()
	go func() { metricsDone <- httpserve.Serve(metricsCtx, metricsLn, s.metrics, metricsCfg) }()
	s.cfg.Logger.Info("serving", "hooks", hookLn.Addr().String(), "metrics", metricsLn.Addr().String(), "tls", s.cfg.TLS != nil)

	// A listener that stops on its own ends the server; the error (or nil,
	// if it was closed cleanly) is kept and the other one still drains.
	var hookErr, metricsErr error
	hookOpen, metricsOpen := true, true
	select {
	case <-ctx.Done():
	case hookErr = <-hookDone:
		hookOpen = false
	case metricsErr = <-metricsDone:
		metricsOpen = false
	}

	s.health.StartDraining()
	if hookOpen && metricsOpen && s.cfg.ShutdownDelay > 0 {
		s.cfg.Logger.Info("draining", "delay", s.cfg.ShutdownDelay)
		time.Sleep(s.cfg.ShutdownDelay)
	}
	stopHooks()
	if hookOpen {
		hookErr = <-hookDone
	}
	stopMetrics()
	if metricsOpen {
		metricsErr = <-metricsDone
	}
	if err := errors.Join(hookErr, metricsErr); err != nil {
		return err
	}
	if !hookOpen || !metricsOpen {
		return errors.New("a listener stopped before shutdown")
	}
	s.cfg.Logger.Info("stopped")
	return nil
}

func (s *Server) listenerConfig() httpserve.Config {
	return httpserve.Config{
		Timeouts: httpserve.Timeouts{
			ReadHeader: s.cfg.ReadHeaderTimeout,
			Read:       s.cfg.ReadTimeout,
			Write:      s.cfg.WriteTimeout,
			Idle:       s.cfg.IdleTimeout,
		},
		MaxHeaderBytes:  s.cfg.MaxHeaderBytes,
		Conns:           s.cfg.Conns,
		ShutdownTimeout: s.cfg.ShutdownTimeout,
		// TLS handshake failures (a client without a certificate under
		// mTLS) and other connection errors end up in the same log.
		Logger: s.cfg.Logger,
	}
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
