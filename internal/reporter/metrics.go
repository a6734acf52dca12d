package reporter

import (
	"sync/atomic"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/ccclient"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Endpoint labels of the sends metric.
const (
	endpointNodeHealth      = "node-health"
	endpointWorkspaceStatus = "workspace-status"
	endpointDeployStatus    = "deploy-status"
)

// logKeyNoToken rate-limits the missing-token warning apart from the
// endpoints' failure logs.
const logKeyNoToken = "token-file"

// logKeyDirectives rate-limits the failure log of directive writes.
const logKeyDirectives = "directive-write"

// logKeyDirectiveRefused rate-limits the log of refused directives: a
// flood of forged ones must not flood the log too.
const logKeyDirectiveRefused = "directive-refused"

// logKeyTombstones rate-limits the failure log of the tombstone file.
const logKeyTombstones = "tombstone-file"

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
			Help: "Observations or reports dropped, by reason (workspace_limit, tombstone_limit, node_limit, pod_limit, claim_limit, directive_limit, invalid, rejected).",
		}, []string{"reason"}),
		observations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_observations_total",
			Help: "Observations received from the hook server, by kind.",
		}, []string{"kind"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_events_total",
			Help: "Kubernetes Events about users' objects, by result (recorded, rate_limited).",
		}, []string{"result"}),
		directiveWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_directive_writes_total",
			Help: "Directives written onto Workspaces as annotations, by result (ok, not_found, error).",
		}, []string{"result"}),
		directivesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_directives_refused_total",
			Help: "Directives from Cluster Control the reporter refused to write, each counted once, by reason (invalid, invalid_hash, foreign_namespace, unknown_workspace).",
		}, []string{"reason"}),
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
	// Pre-create the drop series so a dashboard shows 0, not "no data".
	for _, r := range []string{state.DropWorkspaceLimit, state.DropTombstoneLimit, state.DropNodeLimit, state.DropPodLimit, state.DropClaimLimit, state.DropDirectiveLimit, state.DropAutoScaleLimit, state.DropInvalid, state.DropRejected} {
		m.dropped.WithLabelValues(r)
	}
	for _, r := range []string{state.RefuseInvalid, state.RefuseInvalidHash, state.RefuseForeignNamespace, state.RefuseUnknownWorkspace} {
		m.directivesRefused.WithLabelValues(r)
	}
	for _, a := range []string{ccapi.ActionRestartRequired, ccapi.ActionIdle} {
		for _, r := range []string{state.WaitBudget, state.WaitInterval} {
			m.directivesDeferred.WithLabelValues(a, r)
		}
	}
	for _, r := range []string{"recorded", "rate_limited"} {
		m.events.WithLabelValues(r)
	}
	return m
}
