package clustercontrol

import (
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/go-chi/chi/v5"
)

// adminLimit bounds admin request bodies, which are a few hundred bytes.
const adminLimit = 64 << 10

// AdminFault is the body of PUT /admin/faults.
type AdminFault struct {
	// Path is the API path the fault applies to; empty for every path.
	Path       string `json:"path,omitempty"`
	Status     int    `json:"status,omitempty"`
	RetryAfter string `json:"retryAfter,omitempty"`
	// Delay is a Go duration, e.g. "3s".
	Delay string `json:"delay,omitempty"`
	Times int    `json:"times,omitempty"`
}

// AdminState is the answer of GET /admin/state.
type AdminState struct {
	Workspaces     map[string]ccapi.WorkspaceStatusReport `json:"workspaces"`
	LastNodeHealth *ccapi.NodeHealthReport                `json:"lastNodeHealth,omitempty"`
	Directives     []ccapi.Directive                      `json:"directives"`
	Consumed       []Consumption                          `json:"consumed"`
	AutoScales     []AutoScale                            `json:"autoScales,omitempty"`
	ClusterClasses []ccapi.ClassUsage                     `json:"clusterClasses"`
	Requests       int                                    `json:"requests"`
	// Stored is what the server keeps against its budget.
	Stored Stored `json:"stored"`
}

// AdminHandler is the control surface for tests and demos, meant for a
// separate listener on localhost. Every request needs one of
// Options.AdminTokens as its bearer token (401 without): whoever holds it
// decides what the reporter writes onto Workspaces, rolling or idling
// them, and what Cluster Control answers.
//
//	PUT    /admin/faults                        AdminFault
//	DELETE /admin/faults
//	PUT    /admin/down                          {"down": true|false}
//	PUT    /admin/directives                    {"namespace","name","action","artifactHash"}
//	DELETE /admin/directives/{namespace}/{name}
//	GET    /admin/state
func (s *Server) AdminHandler() http.Handler {
	admin := httpserve.NewRouter()
	admin.Put("/admin/faults", func(w http.ResponseWriter, r *http.Request) {
		var f AdminFault
		if !decodeAdmin(w, r, &f) {
			return
		}
		var delay time.Duration
		if f.Delay != "" {
			d, err := time.ParseDuration(f.Delay)
			if err != nil || d < 0 {
				writeError(w, http.StatusBadRequest, "delay must be a non-negative Go duration")
				return
			}
			delay = d
		}
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			writeError(w, http.StatusBadRequest, "status must be 4xx or 5xx")
			return
		}
		s.SetFault(f.Path, Fault{Status: f.Status, RetryAfter: f.RetryAfter, Delay: delay, Times: f.Times})
		w.WriteHeader(http.StatusNoContent)
	})
	admin.Delete("/admin/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	admin.Put("/admin/down", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Down bool `json:"down"`
		}
		if !decodeAdmin(w, r, &body) {
			return
		}
		s.SetDown(body.Down)
		w.WriteHeader(http.StatusNoContent)
	})
	admin.Put("/admin/directives", func(w http.ResponseWriter, r *http.Request) {
		var d ccapi.Directive
		if !decodeAdmin(w, r, &d) {
			return
		}
		// The action defaults to restart_required, the one directive that
		// existed before idle and wake.
		d.Action = cmp.Or(d.Action, ccapi.ActionRestartRequired)
		if err := s.PutDirective(d); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	admin.Delete("/admin/directives/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.DeleteDirective(chi.URLParam(r, "namespace"), chi.URLParam(r, "name"))
		w.WriteHeader(http.StatusNoContent)
	})
	admin.Get("/admin/state", func(w http.ResponseWriter, r *http.Request) {
		st := AdminState{Workspaces: s.Workspaces(), LastNodeHealth: s.LastNodeReport(), Directives: s.Directives(), Consumed: s.Consumed(),
			AutoScales: s.AutoScales(), ClusterClasses: s.ClassUsage(), Requests: len(s.Requests()), Stored: s.Stored()}
		writeJSON(w, http.StatusOK, st)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No admin token configured refuses everything: an admin API open
		// to anyone would let anyone roll or idle the fleet.
		if !authorized(r, s.opts.AdminTokens) {
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		admin.ServeHTTP(w, r)
	})
}

func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, adminLimit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "cannot decode body")
		return false
	}
	return true
}
