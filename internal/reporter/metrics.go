package reporter

import (
	"sync/atomic"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/ccclient"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/reporter/wake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Endpoint labels of the sends metric.
const (
	endpointNodeHealth      = "node-health"
	endpointWorkspaceStatus = "workspace-status"
	endpointDeployStatus    = "deploy-status"
)

// metrics are the reporter's Prometheus metrics, on a registry of its own so
// the sidecar's /metrics shows only what it owns.
type metrics struct {
	reg          *prometheus.Registry
	sends        *prometheus.CounterVec
	lastSuccess  *prometheus.GaugeVec
	dropped      *prometheus.CounterVec
	observations *prometheus.CounterVec
	events       *prometheus.CounterVec
	// directiveWrites counts Workspace patches by result.
	directiveWrites *prometheus.CounterVec
	// directivesRefused counts directives refused, once each, by reason;
	// directivesDeferred those that waited for their budget.
	directivesRefused  *prometheus.CounterVec
	directivesDeferred *prometheus.CounterVec
	resyncs            prometheus.Counter
}

// dropBounds names the bound each *_limit drop reason is a drop at, the
// bound label of formspec_reporter_dropped_observations_total: the
// formspec_reporter_limit series, and the --max-* flag, to raise. A
// directive beyond --max-workspaces is a drop at the workspaces bound;
// autoscales is the fixed maxAutoScales of one workspace.
var dropBounds = map[string]string{
	state.DropWorkspaceLimit: "workspaces",
	state.DropDirectiveLimit: "workspaces",
	state.DropTombstoneLimit: "tombstones",
	state.DropNodeLimit:      "nodes",
	state.DropPodLimit:       "pods",
	state.DropClaimLimit:     "claims",
	state.DropAutoScaleLimit: "autoscales",
}

// drop counts an observation or report dropped for reason.
func (m *metrics) drop(reason string) { m.dropped.WithLabelValues(reason, dropBounds[reason]).Inc() }

// waitingGauge is formspec_reporter_directives_waiting for one action.
func waitingGauge(st *state.State, action string, f func(state.Counts) int) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "formspec_reporter_directives_waiting",
		Help:        "Directives from Cluster Control waiting for their budget now, by action; 0 on a reporter that does not write directives.",
		ConstLabels: prometheus.Labels{"action": action},
	}, func() float64 { return float64(f(st.Counts())) })
}

func newMetrics(st *state.State, files []ccclient.Credential, writer *atomic.Bool) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_sends_total",
			Help: "Calls to Cluster Control by endpoint and result (ok, network_error, server_error, throttled, conflict, rejected).",
		}, []string{"endpoint", "result"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "formspec_reporter_last_success_timestamp_seconds",
			Help: "Unix time of the last successful call to Cluster Control, by endpoint.",
		}, []string{"endpoint"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_dropped_observations_total",
			Help: "Observations or reports dropped, by reason (workspace_limit, tombstone_limit, node_limit, pod_limit, claim_limit, directive_limit, autoscale_limit, invalid, rejected) and, for a drop at a bound, the bound (workspaces, tombstones, nodes, pods, claims, autoscales; as in formspec_reporter_limit).",
		}, []string{"reason", "bound"}),
		observations: counterVec("formspec_reporter_observations_total",
			"Observations received from the hook server, by kind.",
			"kind"),
		events: counterVec("formspec_reporter_events_total",
			"Kubernetes Events about users' objects, by result (recorded, rate_limited).",
			"result", "recorded", "rate_limited"),
		directiveWrites: counterVec("formspec_reporter_directive_writes_total",
			"Directives written onto Workspaces as annotations, by result (ok, not_found, error).",
			"result"),
		directivesRefused: counterVec("formspec_reporter_directives_refused_total",
			"Directives from Cluster Control the reporter refused to write, each counted once, by reason (invalid, invalid_hash, foreign_namespace, unknown_workspace).",
			"reason", state.RefuseInvalid, state.RefuseInvalidHash, state.RefuseForeignNamespace, state.RefuseUnknownWorkspace),
		directivesDeferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_directives_deferred_total",
			Help: "Directives that had to wait for their budget, each counted once, by action (restart_required, idle) and reason (budget: the share of workspaces at once is used up; interval: the workspace began one less than the least interval ago).",
		}, []string{"action", "reason"}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "formspec_reporter_resync_reports_total",
			Help: "Workspace reports queued by the periodic re-report of unchanged workspaces.",
		}),
	}
	gauge := func(name, help string, f func(state.Counts) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			return float64(f(st.Counts()))
		})
	}
	m.reg.MustRegister(
		m.sends, m.lastSuccess, m.dropped, m.observations, m.events, m.directiveWrites, m.directivesRefused, m.directivesDeferred, m.resyncs,
		gauge("formspec_reporter_pending_workspaces", "Workspaces with a status report not yet accepted by Cluster Control.", func(c state.Counts) int { return c.Pending }),
		gauge("formspec_reporter_tracked_workspaces", "Workspaces the reporter holds state for.", func(c state.Counts) int { return c.Workspaces }),
		gauge("formspec_reporter_tracked_nodes", "Nodes the reporter holds state for.", func(c state.Counts) int { return c.Nodes }),
		gauge("formspec_reporter_tracked_pods", "Workspace pods the reporter holds placement for.", func(c state.Counts) int { return c.Pods }),
		gauge("formspec_reporter_tombstones", "Workspace deletions not yet acknowledged by Cluster Control.", func(c state.Counts) int { return c.Tombstones }),
		gauge("formspec_reporter_tracked_claims", "ResourceClaims the reporter remembers decisions of, to announce changes.", func(c state.Counts) int { return c.Claims }),
		gauge("formspec_reporter_directives", "Directives from Cluster Control not yet consumed.", func(c state.Counts) int { return c.Directives }),
		waitingGauge(st, ccapi.ActionRestartRequired, func(c state.Counts) int { return c.WaitingRestarts }),
		waitingGauge(st, ccapi.ActionIdle, func(c state.Counts) int { return c.WaitingIdles }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "formspec_reporter_directive_writer",
			Help: "1 while this reporter is the one that writes directives (it holds the Lease, or there is none), 0 otherwise.",
		}, func() float64 {
			if writer.Load() {
				return 1
			}
			return 0
		}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, f := range files {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "formspec_reporter_credentials_file_ok",
			Help:        "1 while a credentials file for Cluster Control (token, client certificate, CA) loads, 0 while it is broken and not used.",
			ConstLabels: prometheus.Labels{"file": f.Name()},
		}, func() float64 {
			if f.Err() != nil {
				return 0
			}
			return 1
		}))
	}
	// Pre-create the series so a dashboard shows 0, not "no data".
	for _, r := range []string{state.DropWorkspaceLimit, state.DropTombstoneLimit, state.DropNodeLimit, state.DropPodLimit, state.DropClaimLimit,
		state.DropDirectiveLimit, state.DropAutoScaleLimit, state.DropInvalid, state.DropRejected} {
		m.dropped.WithLabelValues(r, dropBounds[r])
	}
	for _, a := range []string{ccapi.ActionRestartRequired, ccapi.ActionIdle} {
		for _, r := range []string{state.WaitBudget, state.WaitInterval} {
			m.directivesDeferred.WithLabelValues(a, r)
		}
	}
	return m
}

// counterVec is a counter by one label, with each of values created at 0,
// so that a dashboard shows 0, not "no data".
func counterVec(name, help, label string, values ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}

// coldStartBuckets reach from a pod that starts in a second to the longest
// wake timeout worth waiting for.
var coldStartBuckets = []float64{0.5, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60, 120}

// newWakeMetrics registers the wake loop's metrics on reg.
func newWakeMetrics(reg *prometheus.Registry, w *wake.Waker) wake.Metrics {
	m := wake.Metrics{
		ColdStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "formspec_reporter_wake_cold_start_seconds",
			Help:    "Cold starts of the wakes this reporter made: from the poll that first saw a request held for an idle wake-on-request workspace to the poll that saw the held requests let go, by result (answered; timeout when that was after the class's wake timeout, so the interceptor answered 504).",
			Buckets: coldStartBuckets,
		}, []string{"result"}),
		Wakes: counterVec("formspec_reporter_wakes_total",
			"Wakes of idle wake-on-request workspaces for a held request, by result (woken, already_awake, error).",
			"result", "woken", "already_awake", "error"),
		Idles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "formspec_reporter_inactivity_idles_total",
			Help: "Wake-on-request workspaces idled after their class's idleAfterSeconds without a request.",
		}),
		Overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "formspec_reporter_wake_overflows_total",
			Help: "Times this reporter switched on the cap of a wake-on-request workspace without a ready pod that held its class's maxHeldRequests, so that further requests were refused with 503.",
		}),
		Polls: counterVec("formspec_reporter_interceptor_polls_total",
			"Polls of the interceptors' queues, by result (complete; partial when some interceptor did not answer; failed when none did).",
			"result", "complete", "partial", "failed"),
	}
	reg.MustRegister(m.ColdStart, m.Wakes, m.Idles, m.Overflows, m.Polls,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "formspec_reporter_wake_workspaces",
			Help: "Wake-on-request workspaces the reporter follows.",
		}, func() float64 { return float64(w.Tracked()) }))
	for _, r := range []string{"answered", "timeout"} {
		m.ColdStart.WithLabelValues(r)
	}
	return m
}
