// Package reporter is the sidecar that reports what the hook server observes
// to Cluster Control: node health on a timer, workspace status on change,
// and restart_required directives fetched from Cluster Control and served
// back to the hook server.
//
// Everything it holds is bounded by the number of workspaces, nodes and pods
// (each capped), never by how long Cluster Control has been unreachable:
// workspace reports are coalesced per workspace, latest state wins, and node
// reports are rebuilt from the latest state on every send.
package reporter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formspec/formspec-hooks/hooks/clustercontrol/ccapi"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures a Reporter. Zero durations and limits take the defaults
// of the formspec-reporter flags.
type Config struct {
	// ClusterControlURL is the base URL of Cluster Control.
	ClusterControlURL string
	// Reporter identifies this reporter in node-health reports, usually the
	// pod name.
	Reporter string
	// TokenFile holds the bearer token; empty sends no Authorization. The
	// file may be missing or empty at start: calls then go out without
	// Authorization, with a rate-limited warning, until it appears.
	TokenFile string
	// CAFile, ClientCertFile and ClientKeyFile configure TLS and mTLS
	// towards Cluster Control.
	CAFile, ClientCertFile, ClientKeyFile string
	// HTTPClient replaces the client built from the TLS settings.
	HTTPClient *http.Client

	NodeHealthInterval   time.Duration // default 15s
	DeployStatusInterval time.Duration // default 30s
	// NodeStaleIntervals is how many node-health intervals a node may go
	// unobserved before it is forgotten (default 4).
	NodeStaleIntervals int
	// PodStaleAfter is how long a pod may go unobserved before it no
	// longer counts towards its node (default 5m, five resyncs of the
	// workspace-pods controller).
	PodStaleAfter  time.Duration
	RequestTimeout time.Duration // default 10s
	BackoffBase    time.Duration // default 500ms
	BackoffMax     time.Duration // default 60s
	// LogInterval is the least time between two failure logs for one
	// endpoint (default 30s).
	LogInterval time.Duration

	MaxWorkspaces int // default 20000
	MaxNodes      int // default 5000
	MaxPods       int // default 200000

	Logger *slog.Logger

	// now, sleep and rand replace the clock and the jitter source in tests.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64
}

// Reporter is the sidecar's core. Create it with New, start it with Run and
// serve LocalHandler and OpsHandler.
type Reporter struct {
	cfg     Config
	cc      *ccClient
	st      *state
	m       *metrics
	log     *slog.Logger
	backoff backoff
	limiter *logLimiter
	// wake nudges the workspace sender when a report becomes pending.
	wake  chan struct{}
	ready atomic.Bool
}

// New validates cfg and builds a Reporter.
func New(cfg Config) (*Reporter, error) {
	u, err := url.Parse(cfg.ClusterControlURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cluster control URL %q must be an absolute http(s) URL", cfg.ClusterControlURL)
	}
	if cfg.Reporter == "" {
		return nil, fmt.Errorf("reporter name is required")
	}
	setDefault(&cfg.NodeHealthInterval, 15*time.Second)
	setDefault(&cfg.DeployStatusInterval, 30*time.Second)
	setDefault(&cfg.NodeStaleIntervals, 4)
	setDefault(&cfg.PodStaleAfter, 5*time.Minute)
	setDefault(&cfg.RequestTimeout, 10*time.Second)
	setDefault(&cfg.BackoffBase, 500*time.Millisecond)
	setDefault(&cfg.BackoffMax, 60*time.Second)
	setDefault(&cfg.LogInterval, 30*time.Second)
	setDefault(&cfg.MaxWorkspaces, 20000)
	setDefault(&cfg.MaxNodes, 5000)
	setDefault(&cfg.MaxPods, 200000)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.sleep == nil {
		cfg.sleep = sleep
	}
	if cfg.rand == nil {
		cfg.rand = defaultRand
	}
	hc := cfg.HTTPClient
	if hc == nil {
		if hc, err = newHTTPClient(cfg.CAFile, cfg.ClientCertFile, cfg.ClientKeyFile, cfg.Logger); err != nil {
			return nil, err
		}
	}
	var tok *fileToken
	if cfg.TokenFile != "" {
		if tok, err = newFileToken(cfg.TokenFile, cfg.Logger); err != nil {
			return nil, err
		}
	}
	r := &Reporter{
		cfg:     cfg,
		cc:      &ccClient{base: u, http: hc, token: tok, timeout: cfg.RequestTimeout, now: cfg.now},
		log:     cfg.Logger,
		backoff: backoff{base: cfg.BackoffBase, limit: cfg.BackoffMax, rand: cfg.rand},
		limiter: newLogLimiter(cfg.LogInterval),
		wake:    make(chan struct{}, 1),
	}
	r.cc.noToken = r.warnNoToken
	r.st = newState(limits{
		workspaces: cfg.MaxWorkspaces,
		nodes:      cfg.MaxNodes,
		pods:       cfg.MaxPods,
		nodeStale:  time.Duration(cfg.NodeStaleIntervals) * cfg.NodeHealthInterval,
		podStale:   cfg.PodStaleAfter,
	}, func(reason string) { r.m.dropped.WithLabelValues(reason).Inc() })
	r.m = newMetrics(r.st)
	return r, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Registry returns the reporter's metrics registry.
func (r *Reporter) Registry() *prometheus.Registry { return r.m.reg }

// Run reports until ctx ends. The three loops are independent, so a slow
// workspace-status call cannot delay node health or the directive poll.
func (r *Reporter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){r.runWorkspaceSender, r.runNodeHealth, r.runDeployStatus} {
		wg.Go(func() { loop(ctx) })
	}
	r.ready.Store(true)
	<-ctx.Done()
	// Fail readiness first so the pod leaves its Service while the loops
	// and listeners wind down.
	r.ready.Store(false)
	wg.Wait()
	return nil
}

// Observe applies one observation from the hook server.
func (r *Reporter) Observe(obs observation.Observation) error {
	if err := obs.Validate(); err != nil {
		r.m.dropped.WithLabelValues(dropInvalid).Inc()
		return err
	}
	now := r.cfg.now()
	switch {
	case obs.Workspace != nil:
		r.m.observations.WithLabelValues("workspace").Inc()
		if r.st.observeWorkspace(obs.Workspace, now) {
			r.nudge()
		}
	case obs.WorkspaceDeleted != nil:
		r.m.observations.WithLabelValues("workspace_deleted").Inc()
		if r.st.deleteWorkspace(obs.WorkspaceDeleted.Namespace, obs.WorkspaceDeleted.Name, now) {
			r.nudge()
		}
	case obs.Node != nil:
		r.m.observations.WithLabelValues("node").Inc()
		r.st.observeNode(obs.Node, now)
	case obs.Pod != nil:
		r.m.observations.WithLabelValues("pod").Inc()
		r.st.observePod(obs.Pod, now)
	}
	return nil
}

// RestartDirective returns the artifact hash Cluster Control asked the
// workspace to roll to, if a restart_required directive is pending.
func (r *Reporter) RestartDirective(namespace, name string) (string, bool) {
	return r.st.directive(namespace, name)
}

func (r *Reporter) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// record counts a call and logs a failure, rate-limited per endpoint.
func (r *Reporter) record(endpoint string, res result) {
	r.m.sends.WithLabelValues(endpoint, res.label()).Inc()
	if res.outcome == sent {
		r.m.lastSuccess.WithLabelValues(endpoint).Set(float64(r.cfg.now().UnixNano()) / 1e9)
		return
	}
	ok, held := r.limiter.allow(endpoint, r.cfg.now())
	if !ok {
		return
	}
	action := "will retry"
	if res.outcome == rejected {
		action = "dropped"
	}
	r.log.Warn("cluster control call failed", "endpoint", endpoint, "status", res.status,
		"action", action, "retryAfter", res.retryAfter, "suppressed", held, "err", res.err)
}

// warnNoToken logs that calls go out without a bearer token, at most once
// per LogInterval: it is expected on an install without the optional
// Secret, but Cluster Control may refuse such calls, and the operator
// should know why.
func (r *Reporter) warnNoToken(err error) {
	ok, held := r.limiter.allow(logKeyNoToken, r.cfg.now())
	if !ok {
		return
	}
	r.log.Warn("calling cluster control without a bearer token until the token file appears",
		"suppressed", held, "err", err)
}

// runWorkspaceSender sends pending workspace reports one at a time, oldest
// first. One failure backs off the whole sender: when Cluster Control fails
// one report it is almost always failing all of them.
func (r *Reporter) runWorkspaceSender(ctx context.Context) {
	attempt := 0
	for {
		p, ok := r.st.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		res := r.cc.do(ctx, http.MethodPost, ccapi.PathWorkspaceStatus, p.body, p.key, nil)
		if ctx.Err() != nil {
			return
		}
		r.record(endpointWorkspaceStatus, res)
		r.st.finish(p, res.outcome)
		switch res.outcome {
		case sent:
			attempt = 0
		case rejected:
			attempt = 0
			r.m.dropped.WithLabelValues(dropRejected).Inc()
		case retry:
			d := r.backoff.delay(attempt, res.retryAfter)
			attempt++
			if r.cfg.sleep(ctx, d) != nil {
				return
			}
		}
	}
}

// runNodeHealth sends a fresh node report every interval. A failed report is
// not resent: the next one, built from newer state, replaces it, sooner than
// the interval when the backoff allows.
func (r *Reporter) runNodeHealth(ctx context.Context) {
	attempt := 0
	wait := jitter(r.cfg.NodeHealthInterval, r.cfg.rand)
	for {
		if r.cfg.sleep(ctx, wait) != nil {
			return
		}
		rep := r.st.nodeReport(r.cfg.Reporter, r.cfg.now())
		body, err := json.Marshal(rep)
		if err != nil {
			r.log.Error("cannot encode node health", "err", err)
			wait = jitter(r.cfg.NodeHealthInterval, r.cfg.rand)
			continue
		}
		res := r.cc.do(ctx, http.MethodPost, ccapi.PathNodeHealth, body, idempotencyKey(body), nil)
		if ctx.Err() != nil {
			return
		}
		r.record(endpointNodeHealth, res)
		wait = jitter(r.cfg.NodeHealthInterval, r.cfg.rand)
		switch res.outcome {
		case sent:
			attempt = 0
		case rejected:
			attempt = 0
			r.m.dropped.WithLabelValues(dropRejected).Inc()
		case retry:
			wait = r.backoff.delay(attempt, res.retryAfter)
			attempt++
		}
	}
}

// runDeployStatus polls Cluster Control for directives, first at once so a
// restarted sidecar serves directives again quickly.
func (r *Reporter) runDeployStatus(ctx context.Context) {
	attempt := 0
	var wait time.Duration
	for {
		if r.cfg.sleep(ctx, wait) != nil {
			return
		}
		var ds ccapi.DeployStatus
		res := r.cc.do(ctx, http.MethodGet, ccapi.PathDeployStatus, nil, "", &ds)
		if ctx.Err() != nil {
			return
		}
		r.record(endpointDeployStatus, res)
		wait = jitter(r.cfg.DeployStatusInterval, r.cfg.rand)
		switch res.outcome {
		case sent:
			attempt = 0
			if r.st.setDirectives(ds.Directives, r.cfg.now()) {
				r.nudge()
			}
		case rejected:
			attempt = 0
		case retry:
			wait = r.backoff.delay(attempt, res.retryAfter)
			attempt++
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// observationsLimit bounds one hand-off batch. The hook client posts at most
// 128 observations, and a Node without its image list is a few KiB, so 8 MiB
// leaves ample room while keeping a runaway client from exhausting memory.
const observationsLimit = 8 << 20

// LocalHandler is the localhost API for the hook server: POST
// /v1/observations and GET /v1/restart-directives/{namespace}/{name}. It
// has no authentication: it listens on the pod's loopback interface only.
func (r *Reporter) LocalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+observation.PathObservations, r.serveObservations)
	mux.HandleFunc("GET "+observation.PathRestartDirectives+"{namespace}/{name}", r.serveDirective)
	return mux
}

func (r *Reporter) serveObservations(w http.ResponseWriter, req *http.Request) {
	raw, ok := httpserve.ReadJSON(w, req, observationsLimit)
	if !ok {
		return
	}
	var b observation.Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		writeError(w, http.StatusBadRequest, "cannot decode observations")
		return
	}
	for _, obs := range b.Observations {
		// An invalid observation is counted and skipped; rejecting the batch
		// would throw away the valid ones beside it.
		_ = r.Observe(obs)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Reporter) serveDirective(w http.ResponseWriter, req *http.Request) {
	h, ok := r.RestartDirective(req.PathValue("namespace"), req.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "no restart directive")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(observation.Directive{ArtifactHash: h})
}

// OpsHandler serves /metrics, /healthz and /readyz, for the metrics
// listener. Readiness does not depend on Cluster Control: the sidecar shares
// a pod with the hook server, and an outage elsewhere must not take the hooks
// out of their Service.
func (r *Reporter) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !r.ready.Load() {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

func writeError(w http.ResponseWriter, code int, msg string) {
	httpserve.WriteError(w, code, msg)
}
