package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

// Defaults of the hook server's own Config fields; the listeners' HTTP
// limits take httpserve.Defaults, the one table every server here shares.
const (
	// DefaultMaxBodyBytes bounds one request body. Metacontroller sends the
	// parent, every observed child and every related object in one body;
	// 8 MiB leaves room for a workspace with many claims and Secrets while
	// keeping a single request from exhausting memory.
	DefaultMaxBodyBytes int64 = 8 << 20
	// DefaultMaxObjects is the most objects (children, attachments and
	// related objects together) one request may carry. A Workspace names
	// at most 32 datastores and its namespace's claims come as related
	// objects; 4096 leaves room for a crowded namespace while keeping each
	// request's work bounded, whatever a forged request holds.
	DefaultMaxObjects = 4096
	// DefaultShutdownDelay is how long readiness fails before the listener
	// closes: long enough for the endpoints controller to see the failed
	// probe and for kube-proxy to stop sending new connections. It is the
	// serve command's default; in a Config, zero means no delay.
	DefaultShutdownDelay = 5 * time.Second
)

// Config configures a Server: its two listeners, its hooks and every limit
// the transport applies to them. Zero fields take the defaults above and
// httpserve's, except ShutdownDelay and the in-flight bounds.
type Config struct {
	// Addr is the hook listener's address, e.g. ":8080".
	Addr string
	// MetricsAddr is the address of the separate listener for /metrics and
	// the probes, the only listener that answers them. It is never behind
	// TLS client verification or tokens, so that the kubelet and
	// Prometheus can reach it; keep it off the Service Metacontroller uses.
	MetricsAddr string

	// Routes are the hook endpoints (see HookRoute).
	Routes []Route
	// Logger gets request lines and lifecycle events; nil discards.
	Logger *slog.Logger
	// Metrics is where requests are counted; nil creates a new set.
	Metrics *Metrics
	// Tokens, when set, is required as a bearer token on hook routes.
	Tokens *filereload.Tokens
	// TLS, when set, serves the hook listener over TLS (see TLSConfig);
	// the metrics listener stays plain HTTP.
	TLS *tls.Config
	// Credentials are the files the server depends on besides Tokens (the
	// TLS files): while one is broken, /readyz fails and
	// formspec_hooks_credentials_file_ok is 0.
	Credentials []Credential

	// MaxInFlight bounds hook requests being worked on; beyond it they get
	// 429 so that Metacontroller backs off instead of piling up requests
	// that would all time out. A request takes its slot only once its body
	// is read, so a client that trickles a body holds no slot. Zero means
	// no bound.
	MaxInFlight int
	// MaxInFlightBytes bounds the request bodies held in memory at once,
	// counted as they are read; a request that would go over it gets 429.
	// Zero means no bound.
	MaxInFlightBytes int64
	// MaxBodyBytes bounds one body; a larger Content-Length is refused
	// before anything is read.
	MaxBodyBytes int64
	// MaxObjects bounds the objects one request carries (see
	// DefaultMaxObjects); more get 413 before the hook runs.
	MaxObjects int
	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics
	// listener. Off by default: profiles expose internals to anyone who
	// can reach that port, and a CPU profile costs CPU while it runs.
	Pprof bool

	// ShutdownDelay is how long readiness fails before the listeners close.
	// Unlike the other fields, zero means no delay (tests want that);
	// production wants DefaultShutdownDelay or more.
	ShutdownDelay time.Duration
	// HTTP holds the limits of both listeners (timeouts, the body timeout,
	// header size, connection caps) and the shutdown timeout, which bounds the wait
	// for in-flight requests. The metrics listener has the same caps: it
	// has no authentication, so anyone who can reach the pod can open
	// connections to it. Its TLS must be nil; set TLS above.
	HTTP httpserve.Config
}

// withDefaults returns cfg with every zero field that has a default set.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxObjects = cmp.Or(cfg.MaxObjects, DefaultMaxObjects)
	if cfg.HTTP.Logger == nil {
		// TLS handshake failures (a client without a certificate under
		// mTLS) and other connection errors end up in the same log.
		cfg.HTTP.Logger = cfg.Logger
	}
	cfg.HTTP = cfg.HTTP.WithDefaults()
	return cfg
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
	if cfg.HTTP.TLS != nil {
		return nil, errors.New("set Config.TLS, not Config.HTTP.TLS: only the hook listener serves TLS")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxObjects < 0 || cfg.MaxInFlight < 0 || cfg.MaxInFlightBytes < 0 || cfg.ShutdownDelay < 0 {
		return nil, errors.New("limits must not be negative")
	}
	cfg = cfg.withDefaults()

	files := slices.Clone(cfg.Credentials)
	if cfg.Tokens != nil {
		files = append(files, cfg.Tokens)
	}
	if err := cfg.Metrics.watchCredentials(files); err != nil {
		return nil, err
	}
	health := &Health{files: files}
	hooks, err := newRouter(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot build hook routes: %w", err)
	}
	metrics := httpserve.NewRouter()
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
// hook listener closes and in-flight requests get up to HTTP.ShutdownTimeout to
// finish. The metrics listener closes last, so the drain can be watched. It
// returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, hookLn, metricsLn net.Listener) error {
	hookCfg, metricsCfg := s.cfg.HTTP, s.cfg.HTTP
	hookCfg.TLS = s.cfg.TLS
	hookCfg.Refused = s.cfg.Metrics.refusals.refused("hooks")
	metricsCfg.Refused = s.cfg.Metrics.refusals.refused("metrics")

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
