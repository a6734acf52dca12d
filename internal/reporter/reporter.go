package reporter

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/reporter/ccclient"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/reporter/tombstone"
	"github.com/formspec/formspec-hooks/internal/reporter/wake"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
)

// Reporter is the sidecar's core. Create it with New, start it with Run and
// serve LocalHandler and OpsHandler.
type Reporter struct {
	cfg     Config
	cc      *ccclient.Client
	st      *state.State
	m       *metrics
	log     *slog.Logger
	backoff ccclient.Backoff
	limiter *logLimiter
	// events and broadcaster are nil without Kube.
	events      *kube.EventWriter
	broadcaster events.EventBroadcaster
	// nudges wakes the workspace sender when a report becomes pending.
	nudges chan struct{}
	ready  atomic.Bool
	// writer is true while this reporter writes directives: it holds the
	// Lease, or there is none to hold (lease.go).
	writer atomic.Bool
	// tombs is nil without a TombstoneFile.
	tombs *tombstone.File
	// waker follows the wake-on-request workspaces; a loop polls the
	// interceptors for them (waking), nil without an InterceptorAdminURL.
	waker  *wake.Waker
	waking *wake.Loop
	// workspaces is the one watch of Workspaces (kube.Watch), nil without
	// Kube.Dynamic.
	workspaces cache.SharedIndexInformer
}

// New validates cfg and builds a Reporter.
func New(cfg Config) (*Reporter, error) {
	u, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validateDefaulted(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	var files []ccclient.Credential
	if hc == nil {
		if hc, files, err = ccclient.NewHTTPClient(cfg.CAFile, cfg.ClientCertFile, cfg.ClientKeyFile, cfg.Logger); err != nil {
			return nil, err
		}
	}
	var tok *ccclient.FileToken
	if cfg.TokenFile != "" {
		if tok, err = ccclient.NewFileToken(cfg.TokenFile, cfg.Logger); err != nil {
			return nil, fmt.Errorf("%w (%s): %w", ErrTokenFile, cfg.TokenFile, err)
		}
		files = append(files, tok)
	}
	r := &Reporter{
		cfg:     cfg,
		cc:      &ccclient.Client{Base: u, HTTP: hc, Token: tok, Timeout: cfg.RequestTimeout, Now: cfg.now},
		log:     cfg.Logger,
		backoff: ccclient.Backoff{Base: cfg.BackoffBase, Limit: cfg.BackoffMax, Rand: cfg.rand},
		limiter: newLogLimiter(cfg.LogInterval),
		nudges:  make(chan struct{}, 1),
	}
	r.cc.NoToken = r.warnNoToken
	r.writer.Store(cfg.Kube != nil && cfg.Kube.Dynamic != nil && !cfg.elects())
	r.st = state.New(state.Limits{
		Workspaces: cfg.MaxWorkspaces,
		Tombstones: cfg.MaxTombstones,
		Nodes:      cfg.MaxNodes,
		Pods:       cfg.MaxPods,
		Claims:     cfg.MaxClaims,
		Restart:    cfg.RestartBudget,
		Idle:       cfg.IdleBudget,
		NodeStale:  time.Duration(cfg.NodeStaleIntervals) * cfg.NodeHealthInterval,
		PodStale:   cfg.PodStaleAfter,
		// Metacontroller resyncs every claim at least this often, so a
		// claim unseen for longer is gone.
		ClaimStale: time.Hour,
	}, func(reason string) { r.m.drop(reason) })
	r.m = newMetrics(r.st, files, &r.writer)
	r.m.reg.MustRegister(ccclient.AnnouncePlainHTTP(r.log, u, cfg.TokenFile != ""))
	r.waker = wake.NewWaker(cfg.MaxWorkspaces, cfg.now(), func(reason string) { r.m.drop(reason) })
	wm := newWakeMetrics(r.m.reg, r.waker)
	if cfg.InterceptorAdminURL != "" {
		p, err := wake.NewPoller(cfg.InterceptorAdminURL, min(cfg.RequestTimeout, time.Second))
		if err != nil {
			return nil, err
		}
		r.waking = r.wakeLoop(p, wm)
	}
	if cfg.TombstoneFile != "" {
		r.tombs = tombstone.NewFile(cfg.TombstoneFile)
		ts, err := tombstone.Load(cfg.TombstoneFile)
		switch {
		case errors.Is(err, tombstone.ErrCorrupt):
			r.log.Warn("starting without the saved tombstones", "err", err)
		case err != nil:
			return nil, err
		}
		r.st.RestoreTombstones(ts, cfg.now())
	}
	if k := cfg.Kube; k != nil && k.Dynamic != nil {
		if r.workspaces, err = kube.NewWorkspaceInformer(k.Dynamic); err != nil {
			return nil, err
		}
	}
	if k := cfg.Kube; k != nil && k.Events != nil {
		r.broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: k.Events})
		rec := r.broadcaster.NewRecorder(scheme.Scheme, kube.ReportingController)
		r.events = kube.NewEventWriter(rec, kube.EventLimits{
			PerObjectBurst: cfg.EventBurst, PerObjectEvery: cfg.EventInterval,
			Burst: cfg.EventTotalBurst, PerSecond: cfg.EventQPS,
		}, cfg.now, func(result string) { r.m.events.WithLabelValues(result).Inc() })
	}
	return r, nil
}

// Workspaces is the reporter's watch of Workspaces, run by Run, for the
// claims summary writer to share (claimsync.Config.Workspaces); nil
// without a cluster.
func (r *Reporter) Workspaces() cache.SharedIndexInformer { return r.workspaces }

// Registry returns the reporter's metrics registry.
func (r *Reporter) Registry() *prometheus.Registry { return r.m.reg }

// Observe applies one observation from the hook server.
func (r *Reporter) Observe(obs observation.Observation) error {
	if err := obs.Validate(); err != nil {
		r.m.drop(state.DropInvalid)
		return err
	}
	now := r.cfg.now()
	var pending bool
	var evs []state.Event
	switch {
	case obs.Workspace != nil:
		r.m.observations.WithLabelValues("workspace").Inc()
		pending, evs = r.st.ObserveWorkspace(obs.Workspace, now)
		r.waker.Observe(obs.Workspace, now)
	case obs.WorkspaceDeleted != nil:
		r.m.observations.WithLabelValues("workspace_deleted").Inc()
		pending, evs = r.st.DeleteWorkspace(obs.WorkspaceDeleted, now)
		r.waker.Forget(types.NamespacedName{Namespace: obs.WorkspaceDeleted.Namespace, Name: obs.WorkspaceDeleted.Name})
	case obs.Node != nil:
		r.m.observations.WithLabelValues("node").Inc()
		r.st.ObserveNode(obs.Node, now)
	case obs.Pod != nil:
		r.m.observations.WithLabelValues("pod").Inc()
		r.st.ObservePod(obs.Pod, now)
	case obs.Claim != nil:
		r.m.observations.WithLabelValues("claim").Inc()
		evs = r.st.ObserveClaim(obs.Claim, now)
	}
	if pending {
		r.nudge()
	}
	if r.events != nil {
		r.events.Write(evs)
	}
	return nil
}

func (r *Reporter) nudge() {
	select {
	case r.nudges <- struct{}{}:
	default:
	}
}
