package claimsync

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// Results of a summary write, the values of the result label of
// formspec_reporter_claims_summary_writes_total.
const (
	resultOK       = "ok"
	resultNotFound = "not_found"
	resultError    = "error"
)

// metrics are the writer's, on the reporter's registry.
type metrics struct {
	// writes counts Workspace patches by result; a failed one is retried
	// and counted again.
	writes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, q workqueue.TypedRateLimitingInterface[types.NamespacedName]) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_claims_summary_writes_total",
			Help: "Claims summaries written onto (or removed from) Workspaces, by result (ok, not_found, error); an error is retried.",
		}, []string{"result"}),
	}
	for _, r := range []string{resultOK, resultNotFound, resultError} {
		m.writes.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.writes, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "formspec_reporter_claims_summary_queue",
			Help: "Workspaces waiting for their claims summary to be evaluated or written; each is queued at most once.",
		}, func() float64 { return float64(q.Len()) }))
	}
	return m
}
