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

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/httpserve"
)

// Defaults are the hook server's own limits, each with how it was chosen;
// the listeners' HTTP limits take httpserve.Defaults, the one table every
// server here shares. They are the defaults of serve's flags, and New
// gives them to an empty Addr and MetricsAddr and a zero MaxBodyBytes and
// MaxObjects. MaxInFlight and
// ShutdownDelay mean none at zero, in a Config as on the command line
// (--max-inflight 0, --shutdown-delay 0), so New leaves those alone; a zero
// MaxInFlightBytes is the budget DefaultInFlightBytes derives from the
// memory limit, in a Config as with --max-inflight-bytes 0.
var Defaults = Config{
	// The ports the install's Service and probes point at.
	Addr:        ":8080",
	MetricsAddr: ":9090",
	// Requests worked on at once, each counted once its body is read;
	// beyond, 429 with Retry-After (docs/security.md shows what 64 and
	// the byte budget together bound).
	MaxInFlight: 64,
	// Metacontroller sends the parent, every observed child and every
	// related object in one body; 8 MiB leaves room for a workspace with
	// many claims and Secrets while keeping a single request from
	// exhausting memory.
	MaxBodyBytes: 8 << 20,
	// A Workspace names at most 32 datastores and its namespace's claims
	// come as related objects; 4096 objects (children, attachments and
	// related objects together) leave room for a crowded namespace while
	// keeping each request's work bounded, whatever a forged request holds.
	MaxObjects: 4096,
	// Long enough for the endpoints controller to see the failed readiness
	// probe and for kube-proxy to stop sending new connections.
	ShutdownDelay: 5 * time.Second,
}

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

	// HealthAddr, when set, is the address of a third listener that
	// answers the probes, /healthz and /readyz, and nothing else, with
	// connection caps of its own (httpserve.ProbeConns). The kubelet's probes go
	// there: no client that can reach the hook or metrics listener can
	// fill it, and the install's NetworkPolicy admits no other pod to it
	// (traffic from the pod's own node, where the kubelet probes from,
	// is always allowed). The probes answer on the metrics listener too.
	HealthAddr string

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
	// Zero takes DefaultInFlightBytes of the memory limit, as serve's
	// --max-inflight-bytes 0 does; negative means no bound.
	MaxInFlightBytes int64
	// MaxBodyBytes bounds one body; a larger Content-Length is refused
	// before anything is read.
	MaxBodyBytes int64
	// MaxObjects bounds the objects one request carries (see
	// Defaults); more get 413 before the hook runs.
	MaxObjects int
	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics
	// listener. Off by default: profiles expose internals to anyone who
	// can reach that port, and a CPU profile costs CPU while it runs.
	Pprof bool

	// ShutdownDelay is how long readiness fails before the listeners close.
	// Unlike the other fields, zero means no delay (tests want that);
	// production wants Defaults.ShutdownDelay or more.
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
	cfg.Addr = cmp.Or(cfg.Addr, Defaults.Addr)
	cfg.MetricsAddr = cmp.Or(cfg.MetricsAddr, Defaults.MetricsAddr)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, Defaults.MaxBodyBytes)
	cfg.MaxObjects = cmp.Or(cfg.MaxObjects, Defaults.MaxObjects)
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = DefaultInFlightBytes(MemoryLimit(), cfg.MaxBodyBytes)
	}
	if cfg.HTTP.Logger == nil {
		// TLS handshake failures (a client without a certificate under
		// mTLS) and other connection errors end up in the same log.
		cfg.HTTP.Logger = cfg.Logger
	}
	cfg.HTTP = cfg.HTTP.WithDefaults()
	return cfg
}

// Server serves hooks on one listener, metrics and probes on another, and
// optionally the probes alone on a third.
type Server struct {
	cfg     Config
	health  *Health
	hooks   http.Handler
	metrics http.Handler
	probes  http.Handler
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

	probes := httpserve.NewRouter()
	health.mount(probes)

	return &Server{cfg: cfg, health: health, hooks: health.closeWhileDraining(hooks), metrics: metrics, probes: probes}, nil
}

// Handler is the hook listener's handler.
func (s *Server) Handler() http.Handler { return s.hooks }

// MetricsHandler is the metrics listener's handler: /metrics, /healthz,
// /readyz.
func (s *Server) MetricsHandler() http.Handler { return s.metrics }

// Listeners are the server's listeners. Health may be nil: the probes
// then answer on the metrics listener only.
type Listeners struct {
	Hooks, Metrics, Health net.Listener
}

// Run listens on the configured addresses and serves until ctx is done; see
// Serve.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	var ls Listeners
	closeAll := func() {
		for _, ln := range []net.Listener{ls.Hooks, ls.Metrics, ls.Health} {
			if ln != nil {
				_ = ln.Close()
			}
		}
	}
	for _, l := range []struct {
		what, addr string
		ln         *net.Listener
	}{
		{"hooks", s.cfg.Addr, &ls.Hooks},
		{"metrics", s.cfg.MetricsAddr, &ls.Metrics},
		{"probes", s.cfg.HealthAddr, &ls.Health},
	} {
		if l.addr == "" && l.what == "probes" {
			continue
		}
		ln, err := lc.Listen(ctx, "tcp", l.addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("cannot listen for %s: %w", l.what, err)
		}
		*l.ln = ln
	}
	return s.Serve(ctx, ls)
}

// Serve serves hooks, metrics and probes on ls until ctx is done, then
// drains: readiness fails at once, new requests are still served for
// ShutdownDelay while the pod leaves the Service's endpoints, each answer
// closing its connection (Health.closeWhileDraining), and then the
// hook listener closes and in-flight requests get up to
// HTTP.ShutdownTimeout to finish. The metrics and probe listeners close
// last, so the drain can be watched. It returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ls Listeners) error {
	type listener struct {
		name string
		ln   net.Listener
		h    http.Handler
		cfg  httpserve.Config
		// last listeners stop after the hook listener has drained.
		last bool
		ctx  context.Context
		stop context.CancelFunc
		done chan error
		open bool
	}
	hookCfg, metricsCfg, healthCfg := s.cfg.HTTP, s.cfg.HTTP, s.cfg.HTTP
	hookCfg.TLS = s.cfg.TLS
	hookCfg.Refused = s.cfg.Metrics.refusals.refused("hooks")
	metricsCfg.Refused = s.cfg.Metrics.refusals.refused("metrics")
	healthCfg.Refused = s.cfg.Metrics.refusals.refused("probes")
	healthCfg.Conns = httpserve.ProbeConns
	all := []*listener{
		{name: "hooks", ln: ls.Hooks, h: s.hooks, cfg: hookCfg},
		{name: "metrics", ln: ls.Metrics, h: s.metrics, cfg: metricsCfg, last: true},
	}
	if ls.Health != nil {
		all = append(all, &listener{name: "probes", ln: ls.Health, h: s.probes, cfg: healthCfg, last: true})
	}
	stopped := make(chan struct{}, len(all))
	attrs := []any{"tls", s.cfg.TLS != nil}
	for _, l := range all {
		l.ctx, l.stop = context.WithCancel(context.WithoutCancel(ctx))
		defer l.stop()
		l.done, l.open = make(chan error, 1), true
		go func() {
			l.done <- httpserve.Serve(l.ctx, l.ln, l.h, l.cfg)
			stopped <- struct{}{}
		}()
		attrs = append(attrs, l.name, l.ln.Addr().String())
	}
	s.cfg.Logger.Info("serving", attrs...)

	// A listener that stops on its own ends the server; its error (or
	// nil, if it was closed cleanly) is kept and the others still drain.
	var errs []error
	select {
	case <-ctx.Done():
	case <-stopped:
	}
	early := false
	for _, l := range all {
		select {
		case err := <-l.done:
			errs = append(errs, err)
			l.open, early = false, true
		default:
		}
	}

	s.health.StartDraining()
	if !early && s.cfg.ShutdownDelay > 0 {
		s.cfg.Logger.Info("draining", "delay", s.cfg.ShutdownDelay)
		time.Sleep(s.cfg.ShutdownDelay)
	}
	for _, last := range []bool{false, true} {
		for _, l := range all {
			if l.last == last {
				l.stop()
			}
		}
		for _, l := range all {
			if l.last == last && l.open {
				errs = append(errs, <-l.done)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if early {
		return errors.New("a listener stopped before shutdown")
	}
	s.cfg.Logger.Info("stopped")
	return nil
}
