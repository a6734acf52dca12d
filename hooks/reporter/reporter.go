// Package reporter is the sidecar that reports what the hook server observes
// to Cluster Control and carries Cluster Control's directives and the hooks'
// decisions into the cluster: node health on a timer, workspace status on
// change and again at an interval, directives written onto Workspaces as
// annotations, and decisions recorded as Events on the user's objects.
//
// Everything it holds is bounded by the number of workspaces, tombstones,
// nodes, pods and claims (each capped), never by how long Cluster Control
// has been unreachable: workspace reports are coalesced per workspace,
// latest state wins, and node reports are rebuilt from the latest state on
// every send.
package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
)

// Config configures a Reporter. Zero durations and limits take the defaults
// of the formspec-reporter flags.
type Config struct {
	// ClusterControlURL is the base URL of Cluster Control.
	ClusterControlURL string
	// Reporter identifies this reporter in node-health reports and Events,
	// usually the pod name.
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

	// Kube writes to the cluster: directives as Workspace annotations and
	// Events. Nil leaves the cluster alone (directives are still fetched,
	// and consumed when something else writes the annotations).
	Kube *KubeClients

	NodeHealthInterval   time.Duration // default 15s
	DeployStatusInterval time.Duration // default 30s
	// ResyncInterval is how often every known workspace is reported again,
	// changed or not, so that Cluster Control recovers lost state
	// (default 10m).
	ResyncInterval time.Duration
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

	MaxWorkspaces int // default 10000
	// MaxTombstones bounds the deletions kept until Cluster Control
	// acknowledges them (default 5000); beyond it the oldest is dropped
	// and counted.
	MaxTombstones int
	// TombstoneFile, when set, keeps those deletions across a restart of
	// the sidecar (an emptyDir survives a container restart): it is read
	// at start and rewritten within a second of a change.
	TombstoneFile string
	MaxNodes      int // default 5000
	MaxPods       int // default 100000
	MaxClaims     int // default 20000

	// EventBurst and EventInterval limit the Events about one object: a
	// burst, then one per interval (defaults 5 and 1m). EventQPS and
	// EventTotalBurst limit all Events (defaults 5/s and 50).
	EventBurst      int
	EventInterval   time.Duration
	EventQPS        float64
	EventTotalBurst int

	Logger *slog.Logger

	// now, sleep and rand replace the clock and the jitter source in tests.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64
}

// KubeClients are the reporter's only ways into the Kubernetes API; its
// RBAC allows nothing else (deploy/reporter).
type KubeClients struct {
	// Dynamic patches formspec.dev/v1alpha1 Workspaces.
	Dynamic dynamic.Interface
	// Events creates and patches events.k8s.io/v1 Events.
	Events typedeventsv1.EventsV1Interface
}

// workspacesResource is what directives are written onto.
var workspacesResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "workspaces"}

// FieldManager names the reporter's writes in managedFields.
const FieldManager = "formspec-reporter"

// reportingController names the reporter in the Events it records.
const reportingController = "formspec.dev/reporter"

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
	// events and broadcaster are nil without Kube.
	events      *eventWriter
	broadcaster events.EventBroadcaster
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
	setDefault(&cfg.ResyncInterval, 10*time.Minute)
	setDefault(&cfg.NodeStaleIntervals, 4)
	setDefault(&cfg.PodStaleAfter, 5*time.Minute)
	setDefault(&cfg.RequestTimeout, 10*time.Second)
	setDefault(&cfg.BackoffBase, 500*time.Millisecond)
	setDefault(&cfg.BackoffMax, 60*time.Second)
	setDefault(&cfg.LogInterval, 30*time.Second)
	setDefault(&cfg.MaxWorkspaces, 10000)
	setDefault(&cfg.MaxTombstones, 5000)
	setDefault(&cfg.MaxNodes, 5000)
	setDefault(&cfg.MaxPods, 100000)
	setDefault(&cfg.MaxClaims, 20000)
	setDefault(&cfg.EventBurst, 5)
	setDefault(&cfg.EventInterval, time.Minute)
	setDefault(&cfg.EventQPS, 5)
	setDefault(&cfg.EventTotalBurst, 50)
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
	var files []credential
	if hc == nil {
		if hc, files, err = newHTTPClient(cfg.CAFile, cfg.ClientCertFile, cfg.ClientKeyFile, cfg.Logger); err != nil {
			return nil, err
		}
	}
	var tok *fileToken
	if cfg.TokenFile != "" {
		if tok, err = newFileToken(cfg.TokenFile, cfg.Logger); err != nil {
			return nil, err
		}
		files = append(files, tok)
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
		tombstones: cfg.MaxTombstones,
		nodes:      cfg.MaxNodes,
		pods:       cfg.MaxPods,
		claims:     cfg.MaxClaims,
		nodeStale:  time.Duration(cfg.NodeStaleIntervals) * cfg.NodeHealthInterval,
		podStale:   cfg.PodStaleAfter,
		// Metacontroller resyncs every claim at least this often, so a
		// claim unseen for longer is gone.
		claimStale: time.Hour,
	}, func(reason string) { r.m.dropped.WithLabelValues(reason).Inc() })
	r.m = newMetrics(r.st, files)
	if cfg.TombstoneFile != "" {
		ts, err := loadTombstones(cfg.TombstoneFile)
		switch {
		case errors.Is(err, errCorruptTombstones):
			r.log.Warn("starting without the saved tombstones", "err", err)
		case err != nil:
			return nil, err
		}
		r.st.restoreTombstones(ts, cfg.now())
	}
	if k := cfg.Kube; k != nil && k.Events != nil {
		r.broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: k.Events})
		rec := r.broadcaster.NewRecorder(scheme.Scheme, reportingController)
		r.events = newEventWriter(rec, eventLimits{
			PerObjectBurst: cfg.EventBurst, PerObjectEvery: cfg.EventInterval,
			Burst: cfg.EventTotalBurst, PerSecond: cfg.EventQPS,
		}, cfg.now, func(result string) { r.m.events.WithLabelValues(result).Inc() })
	}
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

// Run reports until ctx ends. The loops are independent, so a slow
// workspace-status call cannot delay node health or the directive poll.
func (r *Reporter) Run(ctx context.Context) error {
	if r.broadcaster != nil {
		if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return fmt.Errorf("cannot start recording events: %w", err)
		}
		defer r.broadcaster.Shutdown()
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){r.runWorkspaceSender, r.runNodeHealth, r.runDeployStatus, r.runResync, r.runTombstoneSaver} {
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
	var pending bool
	var evs []event
	switch {
	case obs.Workspace != nil:
		r.m.observations.WithLabelValues("workspace").Inc()
		pending, evs = r.st.observeWorkspace(obs.Workspace, now)
	case obs.WorkspaceDeleted != nil:
		r.m.observations.WithLabelValues("workspace_deleted").Inc()
		pending, evs = r.st.deleteWorkspace(obs.WorkspaceDeleted, now)
	case obs.Node != nil:
		r.m.observations.WithLabelValues("node").Inc()
		r.st.observeNode(obs.Node, now)
	case obs.Pod != nil:
		r.m.observations.WithLabelValues("pod").Inc()
		r.st.observePod(obs.Pod, now)
	case obs.Claim != nil:
		r.m.observations.WithLabelValues("claim").Inc()
		evs = r.st.observeClaim(obs.Claim, now)
	}
	if pending {
		r.nudge()
	}
	if r.events != nil {
		r.events.write(evs)
	}
	return nil
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

// call is one request to Cluster Control and what to do with its result.
type call struct {
	method, path string
	body         []byte
	key          string
	out          any
	done         func(result)
}

// endpointLoop is one of the reporter's conversations with Cluster Control.
type endpointLoop struct {
	endpoint string
	// first is the wait before the first call.
	first time.Duration
	// every is the wait after a call that is finished, sent or rejected;
	// nil for none.
	every func() time.Duration
	// next returns the next call, waiting for one if need be; false once
	// ctx has ended.
	next func(ctx context.Context) (call, bool)
}

// run is the one send loop: call, record the outcome, then wait the
// interval after a finished call or the backoff after a failed one. One
// failure backs off the whole endpoint: when Cluster Control fails one
// report it is almost always failing all of them.
func (r *Reporter) run(ctx context.Context, l endpointLoop) {
	if l.first > 0 && r.cfg.sleep(ctx, l.first) != nil {
		return
	}
	attempt := 0
	for {
		c, ok := l.next(ctx)
		if !ok {
			return
		}
		res := r.cc.do(ctx, c.method, c.path, c.body, c.key, c.out)
		if ctx.Err() != nil {
			return
		}
		r.record(l.endpoint, res)
		if c.done != nil {
			c.done(res)
		}
		var wait time.Duration
		switch res.outcome {
		case sent, rejected:
			attempt = 0
			if res.outcome == rejected && c.body != nil {
				r.m.dropped.WithLabelValues(dropRejected).Inc()
			}
			if l.every != nil {
				wait = l.every()
			}
		case retry:
			wait = r.backoff.delay(attempt, res.retryAfter)
			attempt++
		}
		if wait > 0 && r.cfg.sleep(ctx, wait) != nil {
			return
		}
	}
}

// runWorkspaceSender sends pending workspace reports one at a time, oldest
// first, as soon as there are any.
func (r *Reporter) runWorkspaceSender(ctx context.Context) {
	r.run(ctx, endpointLoop{
		endpoint: endpointWorkspaceStatus,
		next: func(ctx context.Context) (call, bool) {
			for {
				if p, ok := r.st.next(); ok {
					return call{method: http.MethodPost, path: ccapi.PathWorkspaceStatus, body: p.body, key: p.key,
						done: func(res result) { r.st.finish(p, res.outcome) }}, true
				}
				select {
				case <-ctx.Done():
					return call{}, false
				case <-r.wake:
				}
			}
		},
	})
}

// runNodeHealth sends a fresh node report every interval. A failed report is
// not resent: the next one, built from newer state, replaces it, sooner than
// the interval when the backoff allows.
func (r *Reporter) runNodeHealth(ctx context.Context) {
	every := func() time.Duration { return jitter(r.cfg.NodeHealthInterval, r.cfg.rand) }
	r.run(ctx, endpointLoop{
		endpoint: endpointNodeHealth,
		first:    every(),
		every:    every,
		next: func(ctx context.Context) (call, bool) {
			body, err := json.Marshal(r.st.nodeReport(r.cfg.Reporter, r.cfg.now()))
			if err != nil {
				// Only a type the encoder cannot handle gets here.
				r.log.Error("cannot encode node health", "err", err)
				return call{}, false
			}
			return call{method: http.MethodPost, path: ccapi.PathNodeHealth, body: body, key: idempotencyKey(body)}, ctx.Err() == nil
		},
	})
}

// runDeployStatus polls Cluster Control for directives, first at once so a
// restarted sidecar carries them out again quickly, and writes each onto
// its Workspace.
func (r *Reporter) runDeployStatus(ctx context.Context) {
	r.run(ctx, endpointLoop{
		endpoint: endpointDeployStatus,
		every:    func() time.Duration { return jitter(r.cfg.DeployStatusInterval, r.cfg.rand) },
		next: func(ctx context.Context) (call, bool) {
			ds := new(ccapi.DeployStatus)
			return call{method: http.MethodGet, path: ccapi.PathDeployStatus, out: ds, done: func(res result) {
				if res.outcome != sent {
					return
				}
				if r.st.setDirectives(ds.Directives, r.cfg.now()) {
					r.nudge()
				}
				r.writeDirectives(ctx)
			}}, ctx.Err() == nil
		},
	})
}

// runResync queues every known workspace for a fresh report each
// ResyncInterval (jittered).
func (r *Reporter) runResync(ctx context.Context) {
	for {
		if r.cfg.sleep(ctx, jitter(r.cfg.ResyncInterval, r.cfg.rand)) != nil {
			return
		}
		if n := r.st.resync(r.cfg.now()); n > 0 {
			r.m.resyncs.Add(float64(n))
			r.nudge()
		}
	}
}

// writeDirectives writes the directives that are not on their Workspace
// yet. The patch sets (or removes) one annotation and nothing else, so it
// is idempotent: reporters of several replicas writing the same directive
// write the same value, and the API server records no change for a repeat.
func (r *Reporter) writeDirectives(ctx context.Context) {
	if r.cfg.Kube == nil || r.cfg.Kube.Dynamic == nil {
		return
	}
	for _, d := range r.st.toWrite() {
		err := r.patchWorkspace(ctx, d)
		switch {
		case err == nil:
			r.m.directiveWrites.WithLabelValues("ok").Inc()
			r.st.written(d)
		case apierrors.IsNotFound(err):
			// Not (or no longer) in the cluster: nothing to write, and
			// asking again will not change that.
			r.m.directiveWrites.WithLabelValues("not_found").Inc()
			r.st.written(d)
		default:
			if ctx.Err() != nil {
				return
			}
			// Retried on the next poll.
			r.m.directiveWrites.WithLabelValues("error").Inc()
			if ok, held := r.limiter.allow(logKeyDirectives, r.cfg.now()); ok {
				r.log.Warn("cannot write directive onto workspace", "namespace", d.Namespace, "name", d.Name,
					"action", d.Action, "suppressed", held, "err", err)
			}
		}
	}
}

// directivePatch is the JSON merge patch that writes d: one annotation.
func directivePatch(d ccapi.Directive) ([]byte, error) {
	var annotations map[string]any
	switch d.Action {
	case ccapi.ActionRestartRequired:
		annotations = map[string]any{v1alpha1.AnnotationArtifactBinaryHash: d.ArtifactHash}
	case ccapi.ActionIdle:
		annotations = map[string]any{v1alpha1.AnnotationIdle: "true"}
	case ccapi.ActionWake:
		annotations = map[string]any{v1alpha1.AnnotationIdle: nil}
	default:
		return nil, fmt.Errorf("unknown action %q", d.Action)
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
}

func (r *Reporter) patchWorkspace(ctx context.Context, d ccapi.Directive) error {
	patch, err := directivePatch(d)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	_, err = r.cfg.Kube.Dynamic.Resource(workspacesResource).Namespace(d.Namespace).
		Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("cannot patch workspace %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
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
// 1 MiB per batch (handoff.Options.BatchBytes), so 8 MiB leaves room for a
// client tuned otherwise while keeping a runaway one from exhausting
// memory; a batch over it gets 413, and the client splits it.
const observationsLimit = 8 << 20

// LocalHandler is the localhost API for the hook server: POST
// /v1/observations. It has no authentication: it listens on the pod's
// loopback interface only.
func (r *Reporter) LocalHandler() http.Handler {
	mux := httpserve.NewRouter()
	mux.Post(observation.PathObservations, r.serveObservations)
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

// OpsHandler serves /metrics, /healthz and /readyz, for the metrics
// listener. Readiness does not depend on Cluster Control: the sidecar shares
// a pod with the hook server, and an outage elsewhere must not take the hooks
// out of their Service.
func (r *Reporter) OpsHandler() http.Handler {
	mux := httpserve.NewRouter()
	mux.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(r.m.reg, promhttp.HandlerOpts{}))
	mux.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
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
