package reporter

import (
	"encoding/json"
	"net/http"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
	deletions := false
	for _, obs := range b.Observations {
		// An invalid observation is counted and skipped; rejecting the batch
		// would throw away the valid ones beside it.
		_ = r.Observe(obs)
		deletions = deletions || obs.WorkspaceDeleted != nil
	}
	// The hook server hands a deletion over once: it is acknowledged only
	// once it is in the tombstone file, or a sidecar killed before the next
	// periodic save would lose it for good. If the file cannot be written,
	// the hook server keeps the batch and posts it again (applying it
	// twice changes nothing).
	if deletions {
		if err := r.saveTombstones(); err != nil {
			r.warn(logKeyTombstones, "cannot save tombstones; asking the hook server to hand the deletions over again", err)
			writeError(w, http.StatusServiceUnavailable, "cannot keep the deletions: the tombstone file cannot be written")
			return
		}
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
	r.mountProbes(mux)
	return mux
}

// ProbeHandler serves /healthz and /readyz alone, for a listener of the
// kubelet's probes that nothing else can fill (formspec-reporter
// --health-listen).
func (r *Reporter) ProbeHandler() http.Handler {
	mux := httpserve.NewRouter()
	r.mountProbes(mux)
	return mux
}

func (r *Reporter) mountProbes(mux chi.Router) {
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
}

func writeError(w http.ResponseWriter, code int, msg string) {
	httpserve.WriteError(w, code, msg)
}
