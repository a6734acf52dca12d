package reporter

import (
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

// metrics are the reporter's Prometheus metrics, on a registry of its own so
// the sidecar's /metrics shows only what it owns.
type metrics struct {
	reg          *prometheus.Registry
	sends        *prometheus.CounterVec
	lastSuccess  *prometheus.GaugeVec
	dropped      *prometheus.CounterVec
	observations *prometheus.CounterVec
}

func newMetrics(st *state) *metrics {
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
			Help: "Observations or reports dropped, by reason (workspace_limit, node_limit, pod_limit, directive_limit, invalid, rejected).",
		}, []string{"reason"}),
		observations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_observations_total",
			Help: "Observations received from the hook server, by kind.",
		}, []string{"kind"}),
	}
	gauge := func(name, help string, f func(counts) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			return float64(f(st.counts()))
		})
	}
	m.reg.MustRegister(
		m.sends, m.lastSuccess, m.dropped, m.observations,
		gauge("formspec_reporter_pending_workspaces", "Workspaces with a status report not yet accepted by Cluster Control.", func(c counts) int { return c.Pending }),
		gauge("formspec_reporter_tracked_workspaces", "Workspaces the reporter holds state for.", func(c counts) int { return c.Workspaces }),
		gauge("formspec_reporter_tracked_nodes", "Nodes the reporter holds state for.", func(c counts) int { return c.Nodes }),
		gauge("formspec_reporter_tracked_pods", "Workspace pods the reporter holds placement for.", func(c counts) int { return c.Pods }),
		gauge("formspec_reporter_restart_directives", "restart_required directives cached for the hook server.", func(c counts) int { return c.Directives }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Pre-create the drop series so a dashboard shows 0, not "no data".
	for _, r := range []string{dropWorkspaceLimit, dropNodeLimit, dropPodLimit, dropDirectiveLimit, dropInvalid, dropRejected} {
		m.dropped.WithLabelValues(r)
	}
	return m
}
