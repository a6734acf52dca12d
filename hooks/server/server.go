package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
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
	// DefaultReadHeaderTimeout stops slow-header clients from holding
	// connections.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout covers reading a body up to the limit from a
	// client in the same cluster.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is well past Metacontroller's hook timeout, so it
	// only ever cuts off a client that stopped reading.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout lets Metacontroller reuse connections between
	// resyncs without keeping dead ones forever.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes is ample for a bearer token and a few ETags.
	DefaultMaxHeaderBytes = 64 << 10
)

// Config configures a Server. Zero durations and sizes take the defaults
// above, except ShutdownDelay.
type Config struct {
	// Addr is the hook listener's address, e.g. ":8080".
	Addr string
	// MetricsAddr is the address of the separate listener for /metrics and
	// the probes. It is never behind TLS client verification or tokens, so
	// that the kubelet and Prometheus can reach it; keep it off the Service
	// Metacontroller uses.
	MetricsAddr string

	// Routes are the hook endpoints.
	Routes []Route
	// Logger gets request lines and lifecycle events; nil discards.
	Logger *slog.Logger
	// Metrics is where requests are counted; nil creates a new set.
	Metrics *Metrics
	// Tokens, when set, is required on hook routes.
	Tokens *TokenFile
	// TLS, when set, serves the hook listener over TLS (see TLSConfig).
	TLS *tls.Config
	// MaxInFlight bounds concurrent hook requests; zero means no bound.
	MaxInFlight int
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

	// The http.Server limits of both listeners; see the Default constants
	// for why each value.
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
	setDefault(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&cfg.ReadTimeout, DefaultReadTimeout)
	setDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	setDefault(&cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)

	health := &Health{}
	hooks, err := NewRouter(cfg.Routes, RouterConfig{
		Logger:      cfg.Logger,
		Metrics:     cfg.Metrics,
		Tokens:      cfg.Tokens,
		MaxInFlight: cfg.MaxInFlight,
		Health:      health,
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
// listeners close and in-flight requests get up to ShutdownTimeout to
// finish. The metrics listener closes last, so the drain can be watched. It
// returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, hookLn, metricsLn net.Listener) error {
	hookSrv := s.httpServer(s.hooks)
	hookSrv.TLSConfig = s.cfg.TLS
	metricsSrv := s.httpServer(s.metrics)

	errc := make(chan error, 2)
	go func() {
		if s.cfg.TLS != nil {
			// The certificate comes from TLSConfig.GetCertificate.
			errc <- hookSrv.ServeTLS(hookLn, "", "")
			return
		}
		errc <- hookSrv.Serve(hookLn)
	}()
	go func() { errc <- metricsSrv.Serve(metricsLn) }()
	s.cfg.Logger.Info("serving", "hooks", hookLn.Addr().String(), "metrics", metricsLn.Addr().String(), "tls", s.cfg.TLS != nil)

	var failed error
	select {
	case <-ctx.Done():
	case err := <-errc:
		failed = fmt.Errorf("listener stopped: %w", err)
	}

	s.health.StartDraining()
	if failed == nil && s.cfg.ShutdownDelay > 0 {
		s.cfg.Logger.Info("draining", "delay", s.cfg.ShutdownDelay)
		time.Sleep(s.cfg.ShutdownDelay)
	}

	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	hookErr := hookSrv.Shutdown(shutdownCtx)
	metricsErr := metricsSrv.Shutdown(shutdownCtx)
	if hookErr != nil {
		hookErr = fmt.Errorf("cannot finish in-flight hook requests within %s: %w", s.cfg.ShutdownTimeout, hookErr)
	}
	if metricsErr != nil {
		metricsErr = fmt.Errorf("cannot stop metrics listener: %w", metricsErr)
	}
	if err := errors.Join(failed, hookErr, metricsErr); err != nil {
		return err
	}
	s.cfg.Logger.Info("stopped")
	return nil
}

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		// TLS handshake failures (a client without a certificate under
		// mTLS) and other connection errors end up in the same log.
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
