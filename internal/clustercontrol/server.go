// Package clustercontrol is a small in-memory Cluster Control implementing
// docs/cluster-control-api.yaml, for tests and local demos. It checks
// bearer tokens, validates bodies, applies each Idempotency-Key once,
// records what it accepted within a byte budget (store.go), holds the
// directives (restart_required, idle, wake) set through its admin API, one
// per workspace, and can be told to misbehave (refuse connections, stall,
// answer 400/429/5xx) while running.
package clustercontrol

import (
	"bytes"
	"cmp"
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

	"golang.org/x/sync/semaphore"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/httpserve"
)

// Body limits. A workspace report is a few KiB; a node report is ~1 KiB per
// node, so 16 MiB covers the largest clusters with room to spare. A body
// is also refused (413) when it is larger than a quarter of
// Options.MaxBytes, so that what is accepted can be kept.
const (
	workspaceStatusLimit = 1 << 20
	nodeHealthLimit      = 16 << 20
)

// historyLimit bounds the length of every recorded list and of the
// idempotency store, beside their bytes: a read of a list copies it.
const historyLimit = 10000

// Defaults are the limits of a Server whose Options leave them zero.
//
// MaxBytes is what the server keeps (store.go). 64 MiB holds four of the
// largest node-health reports the API takes (16 MiB), or, at the sizes a
// reporter really sends (about 1 KiB per node, 2 KiB per workspace
// report), the newest state of 10,000 workspaces (TestScale's largest
// fleet) beside hours of reports: far more than a test or a demo reads,
// and small enough to leave running on a laptop. Capped by count instead,
// 30 node-health reports of 14.7 MB took the server to 667 MiB, and kept
// it there.
//
// InFlightBytes bounds the bodies being read and decoded at once, each
// charged its length (its Content-Length when sent, else its endpoint's
// limit), which is what bounds the server's peak, not only what it keeps
// (see MemoryLimit): one node-health report of the largest size at a time.
// A reporter sends one request at a time per endpoint, far below it; more
// wait their turn.
var Defaults = Options{
	MaxBytes:      64 << 20,
	InFlightBytes: nodeHealthLimit,
}

// Options configures a Server.
type Options struct {
	// Tokens are the accepted bearer tokens of the API; none means no
	// authentication (formspec-clustercontrol then listens on loopback
	// only).
	Tokens []string
	// AdminTokens are the accepted bearer tokens of the admin API, which
	// sets the directives a reporter writes onto Workspaces; none refuses
	// every admin request.
	AdminTokens []string
	// MaxBytes bounds what the server keeps (default Defaults.MaxBytes).
	MaxBytes int64
	// InFlightBytes bounds the request bodies read at once (default
	// Defaults.InFlightBytes, and never below the largest body the
	// server takes).
	InFlightBytes int64
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

	inFlight *semaphore.Weighted

	mu         sync.Mutex
	faults     map[string]*Fault // by path; "" applies to every path
	faultsGen  chan struct{}     // closed when faults change, to release stalled requests
	directives map[string]ccapi.Directive
	kept       *store
	stalled    int

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
	opts.MaxBytes = cmp.Or(opts.MaxBytes, Defaults.MaxBytes)
	// A body the budget would not let through could never be read.
	opts.InFlightBytes = max(cmp.Or(opts.InFlightBytes, Defaults.InFlightBytes), nodeHealthLimit)
	return &Server{
		opts:       opts,
		inFlight:   semaphore.NewWeighted(opts.InFlightBytes),
		faults:     map[string]*Fault{},
		faultsGen:  make(chan struct{}),
		directives: map[string]ccapi.Directive{},
		kept:       newStore(opts.MaxBytes),
		lis:        newListenerState(),
	}
}

// inFlightCost is what a byte of body in flight costs at the peak: the
// buffer reading it grew (up to twice its length), the copy the store
// keeps, and its decoded form, about three times its JSON for a node-health
// report with many labels.
const inFlightCost = 6

// MemoryLimit is the memory the server fits in: what it keeps, and the
// bodies in flight at what they cost. formspec-clustercontrol makes it the
// Go runtime's soft memory limit (unless GOMEMLIMIT is set), so that the
// collector works to stay within it instead of letting the heap grow to
// twice what is kept before it collects. With the defaults it is 160 MiB;
// TestNodeHealthBurstStaysWithinBudget measures the resident set against
// it.
func (s *Server) MemoryLimit() int64 {
	return s.opts.MaxBytes + inFlightCost*s.opts.InFlightBytes
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
			add(s.kept, &s.kept.requests, req, recordOverhead+int64(len(req.Method)+len(req.Path)+len(req.IdempotencyKey)))
			s.mu.Unlock()
		}()
		if s.applyFault(rec, r) {
			return
		}
		if len(s.opts.Tokens) > 0 && !authorized(r, s.opts.Tokens) {
			writeError(rec, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(rec, r)
	})
}

// authorized reports whether r carries one of tokens.
func authorized(r *http.Request, tokens []string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	match := 0
	for _, t := range tokens {
		// Compare against every token so the time taken does not tell
		// which one nearly matched.
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
	}
	return match == 1
}

// readBody reads a JSON body of at most limit bytes, and of at most a
// quarter of the store, within the in-flight budget. The body is a copy of
// its exact length, as the store keeps it: what ReadJSON grew may be up to
// twice as large. The caller calls done once it no longer holds the body's
// decoded form.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, done func(), ok bool) {
	limit = min(limit, s.opts.MaxBytes/4)
	charge := limit
	if r.ContentLength >= 0 {
		charge = min(r.ContentLength, limit)
	}
	if err := s.inFlight.Acquire(r.Context(), charge); err != nil {
		// The client gave up while others were being read.
		return nil, nil, false
	}
	done = func() { s.inFlight.Release(charge) }
	if body, ok = httpserve.ReadJSON(w, r, limit); !ok {
		done()
		return nil, nil, false
	}
	return bytes.Clone(body), done, true
}

func (s *Server) serveNodeHealth(w http.ResponseWriter, r *http.Request) {
	body, done, ok := s.readBody(w, r, nodeHealthLimit)
	if !ok {
		return
	}
	var rep ccapi.NodeHealthReport
	if err := json.Unmarshal(body, &rep); err != nil {
		done()
		writeError(w, http.StatusBadRequest, "body does not match the schema")
		return
	}
	if err := rep.Validate(); err != nil {
		done()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	kept := nodeRecord{reporter: rep.Reporter, sentAt: rep.SentAt, body: body}
	done()
	s.mu.Lock()
	add(s.kept, &s.kept.nodeReports, kept, recordOverhead+int64(len(kept.reporter)+len(kept.body)))
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) serveWorkspaceStatus(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(ccapi.HeaderIdempotencyKey)
	if key == "" || len(key) > 255 {
		writeError(w, http.StatusBadRequest, "Idempotency-Key header is required (1-255 characters)")
		return
	}
	body, done, ok := s.readBody(w, r, workspaceStatusLimit)
	if !ok {
		return
	}
	defer done()
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
	if prev, ok := s.kept.idem[key]; ok {
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
	s.applyWorkspace(rep, body)
	s.remember(key, sum, http.StatusOK)
	writeJSON(w, http.StatusOK, struct{}{})
}

// applyWorkspace records an accepted report, which arrived as body. Called
// with the lock held.
func (s *Server) applyWorkspace(rep ccapi.WorkspaceStatusReport, body []byte) {
	k := rep.Namespace + "/" + rep.Name
	// The history and the state share the body, and each is charged it:
	// what is evicted from one is still counted while the other holds it.
	add(s.kept, &s.kept.wsReports, body, recordOverhead+int64(len(body)))
	// Reports can arrive late (after an outage) or from several reporters:
	// the newest observation wins, not the last to arrive.
	if cur, ok := s.kept.workspaces[k]; !ok || !rep.ObservedAt.Before(cur.observedAt) {
		s.kept.setWorkspace(k, rep.ObservedAt, body)
	}
	// A directive is consumed once. The reporter may say so twice (it
	// repeats the report while the directive is still listed, in case the
	// first was lost), and a repeat finds nothing left to consume. A
	// consumption of another directive than the one held now (an idle
	// consumed after Cluster Control asked for a wake) changes nothing.
	if c := rep.DirectiveConsumed; c != nil {
		if d, ok := s.directives[k]; ok && d.Action == c.Action && d.ArtifactHash == c.ArtifactHash {
			cons := Consumption{Namespace: rep.Namespace, Name: rep.Name, Action: c.Action, ArtifactHash: c.ArtifactHash}
			add(s.kept, &s.kept.consumed, cons, recordOverhead+int64(len(k)+len(cons.Action)+len(cons.ArtifactHash)))
			delete(s.directives, k)
		}
	}
	if a := rep.AutoScale; a != nil {
		add(s.kept, &s.kept.autoScales, AutoScale{Namespace: rep.Namespace, Name: rep.Name, AutoScale: *a},
			recordOverhead+int64(len(k)+len(a.Action)+len(a.Reason)))
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
	return s.kept.autoScales.values()
}

// remember stores an idempotency key; the oldest go first, with the
// history. Called with the lock held.
func (s *Server) remember(key string, sum [32]byte, status int) {
	s.kept.idem[key] = idemEntry{bodyHash: sum, status: status}
	add(s.kept, &s.kept.idemOrder, key, recordOverhead+int64(2*len(key)+len(sum)))
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

// Workspaces returns the current state of every workspace kept, keyed
// "namespace/name"; a deleted workspace keeps its deletion report.
func (s *Server) Workspaces() map[string]ccapi.WorkspaceStatusReport {
	s.mu.Lock()
	bodies := s.kept.workspaceBodies()
	s.mu.Unlock()
	out := make(map[string]ccapi.WorkspaceStatusReport, len(bodies))
	for k, b := range bodies {
		out[k] = decoded[ccapi.WorkspaceStatusReport](b)
	}
	return out
}

// WorkspaceReports returns the accepted workspace reports kept, in arrival
// order, replays excluded.
func (s *Server) WorkspaceReports() []ccapi.WorkspaceStatusReport {
	s.mu.Lock()
	bodies := s.kept.wsReports.values()
	s.mu.Unlock()
	return decodeAll[ccapi.WorkspaceStatusReport](bodies)
}

// ClassUsage returns what the latest node-health report of each reporter
// says about ClusterClasses, merged per class: the limit from the newest
// report and the largest workspace count any reporter saw (each sees only
// the workspaces its hook-server replica synced). Sorted by name.
func (s *Server) ClassUsage() []ccapi.ClassUsage {
	s.mu.Lock()
	latest := s.kept.latestPerReporter()
	s.mu.Unlock()
	merged := map[string]ccapi.ClassUsage{}
	newest := map[string]time.Time{}
	for _, r := range decodeAll[ccapi.NodeHealthReport](latest) {
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

// NodeReports returns the accepted node-health reports kept, in arrival
// order.
func (s *Server) NodeReports() []ccapi.NodeHealthReport {
	s.mu.Lock()
	bodies := s.kept.nodeBodies()
	s.mu.Unlock()
	return decodeAll[ccapi.NodeHealthReport](bodies)
}

// LastNodeReport returns the newest node-health report kept, or nil.
func (s *Server) LastNodeReport() *ccapi.NodeHealthReport {
	s.mu.Lock()
	body := s.kept.lastNodeBody()
	s.mu.Unlock()
	if body == nil {
		return nil
	}
	r := decoded[ccapi.NodeHealthReport](body)
	return &r
}

// Stored returns the bytes the server keeps, as charged, and its budget.
func (s *Server) Stored() Stored {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stored{Bytes: s.kept.used, MaxBytes: s.kept.max}
}

// Stored is what the server keeps against its budget (Options.MaxBytes).
type Stored struct {
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"maxBytes"`
}

// Consumed returns the consumption reports kept, in order.
func (s *Server) Consumed() []Consumption {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept.consumed.values()
}

// Stalled returns how many requests are being held by a Delay fault now.
func (s *Server) Stalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// Requests returns the records kept of the API requests answered, in
// order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept.requests.values()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	httpserve.WriteJSON(w, code, v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	httpserve.WriteError(w, code, msg)
}
