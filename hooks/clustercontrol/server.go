// Package clustercontrol is a small in-memory Cluster Control implementing
// docs/cluster-control-api.yaml, for tests and local demos. It checks
// bearer tokens, validates bodies, applies each Idempotency-Key once,
// records what it accepted, holds the directives (restart_required, idle,
// wake) set through its admin API, one per workspace, and can be told to misbehave (refuse connections, stall,
// answer 400/429/5xx) while running.
package clustercontrol

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

// Body limits. A workspace report is a few KiB; a node report is ~1 KiB per
// node, so 16 MiB covers the largest clusters with room to spare.
const (
	workspaceStatusLimit = 1 << 20
	nodeHealthLimit      = 16 << 20
)

// historyLimit bounds every recorded list and the idempotency store: this
// server runs for a test or a demo, but should not grow without end if left
// running beside a real reporter.
const historyLimit = 10000

// Options configures a Server.
type Options struct {
	// Tokens are the accepted bearer tokens; none means no authentication.
	Tokens []string
	// Logger receives one line per rejected request.
	Logger *slog.Logger
	// Now replaces the clock (tests).
	Now func() time.Time
	// HTTP is the API listener's configuration (default: httpserve's). A
	// Delay fault extends the deadlines of the requests it holds, so a
	// stall longer than the read and write timeouts still ends in the
	// fault's answer.
	HTTP httpserve.Config
}

// Request is the record of one API request.
type Request struct {
	Method         string
	Path           string
	Status         int
	IdempotencyKey string
	// Replayed is true when the answer came from the idempotency store.
	Replayed bool
}

// Consumption is a directive reported as consumed.
type Consumption struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Action       string `json:"action"`
	ArtifactHash string `json:"artifactHash,omitempty"`
}

// Server is the reference Cluster Control. Its zero value is not usable;
// call New.
type Server struct {
	opts Options

	mu          sync.Mutex
	faults      map[string]*Fault // by path; "" applies to every path
	faultsGen   chan struct{}     // closed when faults change, to release stalled requests
	directives  map[string]ccapi.Directive
	workspaces  map[string]ccapi.WorkspaceStatusReport
	wsReports   []ccapi.WorkspaceStatusReport
	nodeReports []ccapi.NodeHealthReport
	consumed    []Consumption
	autoScales  []AutoScale
	requests    []Request
	idem        map[string]idemEntry
	idemOrder   []string
	stalled     int

	lis listenerState
}

type idemEntry struct {
	bodyHash [32]byte
	status   int
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTP.Logger == nil {
		opts.HTTP.Logger = opts.Logger
	}
	opts.HTTP = opts.HTTP.WithDefaults()
	return &Server{
		opts:       opts,
		faults:     map[string]*Fault{},
		faultsGen:  make(chan struct{}),
		directives: map[string]ccapi.Directive{},
		workspaces: map[string]ccapi.WorkspaceStatusReport{},
		idem:       map[string]idemEntry{},
		lis:        newListenerState(),
	}
}

// Handler is the Cluster Control API.
func (s *Server) Handler() http.Handler {
	r := httpserve.NewRouter()
	r.Post(ccapi.PathNodeHealth, s.serveNodeHealth)
	r.Post(ccapi.PathWorkspaceStatus, s.serveWorkspaceStatus)
	r.Get(ccapi.PathDeployStatus, s.serveDeployStatus)
	return s.wrap(r)
}

// Routes lists the API's "METHOD path" pairs, for the test that holds them
// against the OpenAPI document.
func Routes() []string {
	return []string{
		"GET " + ccapi.PathDeployStatus,
		"POST " + ccapi.PathNodeHealth,
		"POST " + ccapi.PathWorkspaceStatus,
	}
}

// statusRecorder remembers the status written, for the request record.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	replayed bool
}

// Unwrap lets http.ResponseController reach the connection, for the
// deadlines a Delay fault extends.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// wrap records every request, applies faults, then checks the token.
// Faults come before authentication: they stand for a proxy or an overloaded
// server that answers before looking at credentials.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			req := Request{Method: r.Method, Path: r.URL.Path, Status: rec.status,
				IdempotencyKey: r.Header.Get(ccapi.HeaderIdempotencyKey), Replayed: rec.replayed}
			s.mu.Lock()
			s.requests = appendBounded(s.requests, req)
			s.mu.Unlock()
		}()
		if s.applyFault(rec, r) {
			return
		}
		if !s.authorized(r) {
			writeError(rec, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(rec, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	if len(s.opts.Tokens) == 0 {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	match := 0
	for _, t := range s.opts.Tokens {
		// Compare against every token so the time taken does not tell
		// which one nearly matched.
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
	}
	return match == 1
}

func (s *Server) serveNodeHealth(w http.ResponseWriter, r *http.Request) {
	var rep ccapi.NodeHealthReport
	if !decode(w, r, nodeHealthLimit, &rep) {
		return
	}
	if err := rep.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	s.nodeReports = appendBounded(s.nodeReports, rep)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) serveWorkspaceStatus(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(ccapi.HeaderIdempotencyKey)
	if key == "" || len(key) > 255 {
		writeError(w, http.StatusBadRequest, "Idempotency-Key header is required (1-255 characters)")
		return
	}
	body, ok := readBody(w, r, workspaceStatusLimit)
	if !ok {
		return
	}
	var rep ccapi.WorkspaceStatusReport
	if err := json.Unmarshal(body, &rep); err != nil {
		writeError(w, http.StatusBadRequest, "body is not a workspace status report")
		return
	}
	if err := rep.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.idem[key]; ok {
		if prev.bodyHash != sum {
			writeError(w, http.StatusUnprocessableEntity, "Idempotency-Key was already used with a different body")
			return
		}
		if rec, ok := w.(*statusRecorder); ok {
			rec.replayed = true
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, prev.status, struct{}{})
		return
	}
	s.applyWorkspace(rep)
	s.remember(key, sum, http.StatusOK)
	writeJSON(w, http.StatusOK, struct{}{})
}

// applyWorkspace records an accepted report. Called with the lock held.
func (s *Server) applyWorkspace(rep ccapi.WorkspaceStatusReport) {
	k := rep.Namespace + "/" + rep.Name
	s.wsReports = appendBounded(s.wsReports, rep)
	// Reports can arrive late (after an outage) or from several reporters:
	// the newest observation wins, not the last to arrive.
	if cur, ok := s.workspaces[k]; !ok || !rep.ObservedAt.Before(cur.ObservedAt) {
		s.workspaces[k] = rep
	}
	// A directive is consumed once. The reporter may say so twice (it
	// repeats the report while the directive is still listed, in case the
	// first was lost), and a repeat finds nothing left to consume. A
	// consumption of another directive than the one held now (an idle
	// consumed after Cluster Control asked for a wake) changes nothing.
	if c := rep.DirectiveConsumed; c != nil {
		if d, ok := s.directives[k]; ok && d.Action == c.Action && d.ArtifactHash == c.ArtifactHash {
			s.consumed = appendBounded(s.consumed, Consumption{Namespace: rep.Namespace, Name: rep.Name, Action: c.Action, ArtifactHash: c.ArtifactHash})
			delete(s.directives, k)
		}
	}
	if a := rep.AutoScale; a != nil {
		s.autoScales = appendBounded(s.autoScales, AutoScale{Namespace: rep.Namespace, Name: rep.Name, AutoScale: *a})
	}
	if rep.Deleted {
		delete(s.directives, k)
	}
}

// AutoScale is a wake or idle a reporter decided on its own, as reported.
type AutoScale struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	ccapi.AutoScale
}

// AutoScales returns the wakes and idles reporters decided, in order.
func (s *Server) AutoScales() []AutoScale {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.autoScales)
}

// remember stores an idempotency key, evicting the oldest beyond the limit.
func (s *Server) remember(key string, sum [32]byte, status int) {
	s.idem[key] = idemEntry{bodyHash: sum, status: status}
	s.idemOrder = append(s.idemOrder, key)
	if len(s.idemOrder) > historyLimit {
		delete(s.idem, s.idemOrder[0])
		s.idemOrder = slices.Delete(s.idemOrder, 0, 1)
	}
}

func (s *Server) serveDeployStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ds := ccapi.DeployStatus{Directives: make([]ccapi.Directive, 0, len(s.directives))}
	for _, d := range s.directives {
		ds.Directives = append(ds.Directives, d)
	}
	s.mu.Unlock()
	slices.SortFunc(ds.Directives, func(a, b ccapi.Directive) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	writeJSON(w, http.StatusOK, ds)
}

// SetDirective asks a workspace to roll to artifactHash.
func (s *Server) SetDirective(namespace, name, artifactHash string) {
	_ = s.PutDirective(ccapi.Directive{Namespace: namespace, Name: name, Action: ccapi.ActionRestartRequired, ArtifactHash: artifactHash})
}

// PutDirective holds d for its workspace, replacing the workspace's
// previous directive: a wake withdraws a pending idle, a new hash a pending
// restart.
func (s *Server) PutDirective(d ccapi.Directive) error {
	if err := d.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directives[d.Namespace+"/"+d.Name] = d
	return nil
}

// DeleteDirective withdraws a workspace's directive.
func (s *Server) DeleteDirective(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.directives, namespace+"/"+name)
}

// Directives returns the pending directives, sorted.
func (s *Server) Directives() []ccapi.Directive {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ccapi.Directive, 0, len(s.directives))
	for _, d := range s.directives {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b ccapi.Directive) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// Workspaces returns the current state of every workspace, keyed
// "namespace/name"; a deleted workspace keeps its deletion report.
func (s *Server) Workspaces() map[string]ccapi.WorkspaceStatusReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ccapi.WorkspaceStatusReport, len(s.workspaces))
	for k, v := range s.workspaces {
		out[k] = v
	}
	return out
}

// WorkspaceReports returns every accepted workspace report in arrival order,
// replays excluded.
func (s *Server) WorkspaceReports() []ccapi.WorkspaceStatusReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.wsReports)
}

// ClassUsage returns what the latest node-health report of each reporter
// says about ClusterClasses, merged per class: the limit from the newest
// report and the largest workspace count any reporter saw (each sees only
// the workspaces its hook-server replica synced). Sorted by name.
func (s *Server) ClassUsage() []ccapi.ClassUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest := map[string]ccapi.NodeHealthReport{}
	for _, r := range s.nodeReports {
		if cur, ok := latest[r.Reporter]; !ok || !r.SentAt.Before(cur.SentAt) {
			latest[r.Reporter] = r
		}
	}
	merged := map[string]ccapi.ClassUsage{}
	newest := map[string]time.Time{}
	for _, r := range latest {
		for _, c := range r.ClusterClasses {
			m := merged[c.Name]
			m.Name = c.Name
			if r.SentAt.After(newest[c.Name]) || newest[c.Name].IsZero() {
				m.MaxWorkspaces, newest[c.Name] = c.MaxWorkspaces, r.SentAt
			}
			m.WorkspaceCount = max(m.WorkspaceCount, c.WorkspaceCount)
			merged[c.Name] = m
		}
	}
	out := make([]ccapi.ClassUsage, 0, len(merged))
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		out = append(out, merged[name])
	}
	return out
}

// NodeReports returns every accepted node-health report in arrival order.
func (s *Server) NodeReports() []ccapi.NodeHealthReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.nodeReports)
}

// Consumed returns the consumption reports received, in order.
func (s *Server) Consumed() []Consumption {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.consumed)
}

// Stalled returns how many requests are being held by a Delay fault now.
func (s *Server) Stalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// Requests returns every API request answered, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func appendBounded[T any](list []T, v T) []T {
	list = append(list, v)
	if len(list) > historyLimit {
		list = slices.Delete(list, 0, len(list)-historyLimit)
	}
	return list
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	return httpserve.ReadJSON(w, r, limit)
}

func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, ok := readBody(w, r, limit)
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "body does not match the schema")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	httpserve.WriteJSON(w, code, v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	httpserve.WriteError(w, code, msg)
}
