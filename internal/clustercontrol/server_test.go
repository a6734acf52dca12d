package clustercontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// openAPI is the part of docs/cluster-control-api.yaml the tests read.
type openAPI struct {
	Paths map[string]map[string]struct {
		Responses map[string]any `json:"responses"`
	} `json:"paths"`
}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	raw, err := os.ReadFile("../../docs/cluster-control-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("cannot parse the OpenAPI document: %v", err)
	}
	return doc
}

// TestRoutesMatchOpenAPI holds the reference server's routes and the
// OpenAPI document to each other, both ways.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	if diff := cmp.Diff(documented, Routes()); diff != "" {
		t.Errorf("routes (-documented, +implemented):\n%s", diff)
	}
	// Every route really is served: an undocumented 404 or 405 would mean
	// Routes() lies.
	h := New(Options{}).Handler()
	for _, route := range Routes() {
		method, path, _ := strings.Cut(route, " ")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
		if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
			t.Errorf("%s is listed but answers %d", route, rec.Code)
		}
	}
}

const validWorkspace = `{"namespace":"team-a","name":"shop","observedAt":"2026-03-01T12:00:00Z","status":{"phase":"Ready","replicas":2,"readyReplicas":2,"updatedReplicas":2,"artifactHash":"sha256:1"}}`

// TestServerAnswers covers the answers the reference server gives, and
// checks each status code is documented for its path.
func TestServerAnswers(t *testing.T) {
	doc := loadOpenAPI(t)
	type req struct {
		method, path, body, key, token, contentType string
	}
	cases := map[string]struct {
		reason       string
		tokens       []string
		fault        *Fault
		requests     []req
		wantStatus   []int
		wantAccepted int
	}{
		"Accepted": {
			reason:       "a valid report with a key is applied",
			requests:     []req{{method: "POST", path: ccapi.PathWorkspaceStatus, body: validWorkspace, key: "k1"}},
			wantStatus:   []int{200},
			wantAccepted: 1,
		},
		"Replay": {
			reason:       "a repeated key with the same body is answered again but applied once",
			requests:     []req{{method: "POST", path: ccapi.PathWorkspaceStatus, body: validWorkspace, key: "k1"}, {method: "POST", path: ccapi.PathWorkspaceStatus, body: validWorkspace, key: "k1"}},
			wantStatus:   []int{200, 200},
			wantAccepted: 1,
		},
		"KeyReuse": {
			reason: "a repeated key with a different body is refused",
			requests: []req{
				{method: "POST", path: ccapi.PathWorkspaceStatus, body: validWorkspace, key: "k1"},
				{method: "POST", path: ccapi.PathWorkspaceStatus, body: strings.Replace(validWorkspace, `"sha256:1"`, `"sha256:2"`, 1), key: "k1"},
			},
			wantStatus:   []int{200, 422},
			wantAccepted: 1,
		},
		"MissingKey": {
			reason:     "workspace-status requires an Idempotency-Key",
			requests:   []req{{method: "POST", path: ccapi.PathWorkspaceStatus, body: validWorkspace}},
			wantStatus: []int{400},
		},
		"InvalidPhase": {
			reason:     "a body that fails validation is a 400",
			requests:   []req{{method: "POST", path: ccapi.PathWorkspaceStatus, body: strings.Replace(validWorkspace, "Ready", "Sleepy", 1), key: "k"}},
			wantStatus: []int{400},
		},
		"WrongContentType": {
			reason:     "only JSON is accepted",
			requests:   []req{{method: "POST", path: ccapi.PathNodeHealth, body: "{}", contentType: "text/plain"}},
			wantStatus: []int{415},
		},
		"TooLarge": {
			reason:     "a body over the limit is a 413",
			requests:   []req{{method: "POST", path: ccapi.PathWorkspaceStatus, body: `{"namespace":"` + strings.Repeat("a", workspaceStatusLimit) + `"}`, key: "k"}},
			wantStatus: []int{413},
		},
		"Unauthorized": {
			reason:     "a wrong token is a 401, a right one passes",
			tokens:     []string{"old", "new"},
			requests:   []req{{method: "GET", path: ccapi.PathDeployStatus, token: "nope"}, {method: "GET", path: ccapi.PathDeployStatus, token: "new"}},
			wantStatus: []int{401, 200},
		},
		"Throttled": {
			reason:     "an injected 429 carries Retry-After and is applied the given number of times",
			fault:      &Fault{Status: 429, RetryAfter: "3", Times: 1},
			requests:   []req{{method: "POST", path: ccapi.PathNodeHealth, body: `{"reporter":"r","sentAt":"2026-03-01T12:00:00Z","nodes":[]}`}, {method: "POST", path: ccapi.PathNodeHealth, body: `{"reporter":"r","sentAt":"2026-03-01T12:00:00Z","nodes":[]}`}},
			wantStatus: []int{429, 200},
		},
		"ServerError": {
			reason:     "an injected 500 answers every path until cleared",
			fault:      &Fault{Status: 500},
			requests:   []req{{method: "GET", path: ccapi.PathDeployStatus}, {method: "GET", path: ccapi.PathDeployStatus}},
			wantStatus: []int{500, 500},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Tokens: tc.tokens})
			if tc.fault != nil {
				s.SetFault("", *tc.fault)
			}
			h := s.Handler()
			var got []int
			for _, r := range tc.requests {
				hr := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
				ct := r.contentType
				if ct == "" {
					ct = "application/json"
				}
				hr.Header.Set("Content-Type", ct)
				if r.key != "" {
					hr.Header.Set(ccapi.HeaderIdempotencyKey, r.key)
				}
				if r.token != "" {
					hr.Header.Set("Authorization", "Bearer "+r.token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, hr)
				got = append(got, rec.Code)
				if rec.Code == 429 && rec.Header().Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
				if _, ok := doc.Paths[r.path][strings.ToLower(r.method)].Responses[strconv.Itoa(rec.Code)]; !ok {
					t.Errorf("%s %s answered %d, which the OpenAPI document does not list", r.method, r.path, rec.Code)
				}
			}
			if diff := cmp.Diff(tc.wantStatus, got); diff != "" {
				t.Errorf("%s\nstatus codes (-want, +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantAccepted, len(s.WorkspaceReports())); diff != "" {
				t.Errorf("%s\naccepted reports (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNewestObservationWins checks that a late report of an older state does
// not overwrite a newer one, and that a consumption removes its directive.
func TestNewestObservationWins(t *testing.T) {
	s := New(Options{})
	s.SetDirective("team-a", "shop", "sha256:2")
	h := s.Handler()
	post := func(body, key string) {
		r := httptest.NewRequest("POST", ccapi.PathWorkspaceStatus, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(ccapi.HeaderIdempotencyKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != 200 {
			t.Fatalf("POST answered %d: %s", rec.Code, rec.Body)
		}
	}
	newer := `{"namespace":"team-a","name":"shop","observedAt":"2026-03-01T12:00:05Z","status":{"phase":"Ready","replicas":2,"readyReplicas":2,"updatedReplicas":2,"artifactHash":"sha256:2"},"directiveConsumed":{"action":"restart_required","artifactHash":"sha256:2"}}`
	older := `{"namespace":"team-a","name":"shop","observedAt":"2026-03-01T12:00:01Z","status":{"phase":"Progressing","replicas":2,"readyReplicas":1,"updatedReplicas":1,"artifactHash":"sha256:1"}}`
	post(newer, "a")
	post(older, "b")
	if got := s.Workspaces()["team-a/shop"].Status.Phase; got != "Ready" {
		t.Errorf("phase after a late older report: got %q, want Ready", got)
	}
	if diff := cmp.Diff([]ccapi.Directive{}, s.Directives()); diff != "" {
		t.Errorf("directives after consumption (-want, +got):\n%s", diff)
	}
}

// TestDownRefusesConnections checks that "down" closes the listener rather
// than answering, and that coming back up serves on the same address.
func TestDownRefusesConnections(t *testing.T) {
	s := New(Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s%s", ln.Addr(), ccapi.PathDeployStatus)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	get := func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("while up: %v", err)
	}
	s.SetDown(true)
	testsync.WaitFor(t, "connections to be refused", func() bool { return get() != nil })
	s.SetDown(false)
	testsync.WaitFor(t, "the server to serve again", func() bool { return get() == nil })
}

// TestDelayOutlastsTimeouts holds a workspace-status request longer than
// the server's read and write timeouts: the fault must still end in an
// answer, with the body read after the stall, not in a cut connection.
//
// The timeouts are a second, not less: the read timeout also bounds the
// time from accepting the connection to the handler, which a busy machine
// can stretch past a few tens of milliseconds.
func TestDelayOutlastsTimeouts(t *testing.T) {
	s := New(Options{HTTP: httpserve.Config{ReadTimeout: time.Second, WriteTimeout: time.Second}})
	s.SetFault(ccapi.PathWorkspaceStatus, Fault{Delay: 1500 * time.Millisecond, Times: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	body := `{"namespace":"team-a","name":"shop","observedAt":"2026-03-01T12:00:05Z","status":{"phase":"Ready","replicas":1,"readyReplicas":1,"updatedReplicas":1}}`
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s%s", ln.Addr(), ccapi.PathWorkspaceStatus), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ccapi.HeaderIdempotencyKey, "k1")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("stalled request got no answer: %v", err)
	}
	resp.Body.Close()
	if diff := cmp.Diff(http.StatusOK, resp.StatusCode); diff != "" {
		t.Errorf("status after the stall: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(1, len(s.WorkspaceReports())); diff != "" {
		t.Errorf("reports accepted after the stall: -want, +got:\n%s", diff)
	}
}

// TestDirectiveConsumption checks that a consumption removes the directive
// it names and nothing else: idle and wake by action, restart_required by
// action and hash.
func TestDirectiveConsumption(t *testing.T) {
	restart := ccapi.Directive{Namespace: "team-a", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: "sha256:2"}
	idle := ccapi.Directive{Namespace: "team-a", Name: "shop", Action: ccapi.ActionIdle}
	cases := map[string]struct {
		reason   string
		held     ccapi.Directive
		consumed ccapi.DirectiveConsumed
		want     []ccapi.Directive
	}{
		"Idle": {
			reason:   "the idle directive is carried out",
			held:     idle,
			consumed: ccapi.DirectiveConsumed{Action: ccapi.ActionIdle},
			want:     []ccapi.Directive{},
		},
		"StaleIdle": {
			reason:   "an idle consumed after Cluster Control asked for a wake leaves the wake",
			held:     ccapi.Directive{Namespace: "team-a", Name: "shop", Action: ccapi.ActionWake},
			consumed: ccapi.DirectiveConsumed{Action: ccapi.ActionIdle},
			want:     []ccapi.Directive{{Namespace: "team-a", Name: "shop", Action: ccapi.ActionWake}},
		},
		"OtherHash": {
			reason:   "a restart onto another hash is not this restart",
			held:     restart,
			consumed: ccapi.DirectiveConsumed{Action: ccapi.ActionRestartRequired, ArtifactHash: "sha256:1"},
			want:     []ccapi.Directive{restart},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(Options{})
			if err := s.PutDirective(tc.held); err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(ccapi.WorkspaceStatusReport{Namespace: "team-a", Name: "shop", ObservedAt: time.Now(),
				Status: &ccapi.WorkspaceStatus{Phase: "Ready"}, DirectiveConsumed: &tc.consumed})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", ccapi.PathWorkspaceStatus, strings.NewReader(string(body)))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(ccapi.HeaderIdempotencyKey, "k")
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, r)
			if rec.Code != 200 {
				t.Fatalf("POST answered %d: %s", rec.Code, rec.Body)
			}
			if diff := cmp.Diff(tc.want, s.Directives()); diff != "" {
				t.Errorf("%s\ndirectives (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestClassUsage checks how ClusterClass reports of several reporters are
// merged: each reporter's latest report counts, the largest count wins.
func TestClassUsage(t *testing.T) {
	s := New(Options{})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, rep := range []ccapi.NodeHealthReport{
		{Reporter: "a", SentAt: t0, ClusterClasses: []ccapi.ClassUsage{{Name: "standard", MaxWorkspaces: 40, WorkspaceCount: 9}}},
		{Reporter: "a", SentAt: t0.Add(time.Second), ClusterClasses: []ccapi.ClassUsage{{Name: "standard", MaxWorkspaces: 40, WorkspaceCount: 3}}},
		{Reporter: "b", SentAt: t0.Add(2 * time.Second), ClusterClasses: []ccapi.ClassUsage{{Name: "standard", MaxWorkspaces: 50, WorkspaceCount: 5}, {Name: "gpu", WorkspaceCount: 1}}},
	} {
		body, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", ccapi.PathNodeHealth, strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, r)
		if rec.Code != 200 {
			t.Fatalf("POST answered %d: %s", rec.Code, rec.Body)
		}
	}
	want := []ccapi.ClassUsage{{Name: "gpu", WorkspaceCount: 1}, {Name: "standard", MaxWorkspaces: 50, WorkspaceCount: 5}}
	if diff := cmp.Diff(want, s.ClassUsage()); diff != "" {
		t.Errorf("class usage (-want, +got):\n%s", diff)
	}
}

// TestOpenAPIExamples decodes every example body of the OpenAPI document
// strictly into the wire type it documents and validates it, so that the
// document and ccapi cannot drift apart: a field renamed on one side only,
// or an example the reference server would refuse, fails here.
func TestOpenAPIExamples(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cluster-control-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type media struct {
		Example  json.RawMessage `json:"example"`
		Examples map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"examples"`
	}
	type content struct {
		JSON media `json:"application/json"`
	}
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content content `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content content `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		media    media
		validate func(raw []byte) error
	}{
		"node-health": {doc.Paths[ccapi.PathNodeHealth]["post"].RequestBody.Content.JSON, func(raw []byte) error {
			var r ccapi.NodeHealthReport
			if err := strict(raw, &r); err != nil {
				return err
			}
			return r.Validate()
		}},
		"workspace-status": {doc.Paths[ccapi.PathWorkspaceStatus]["post"].RequestBody.Content.JSON, func(raw []byte) error {
			var r ccapi.WorkspaceStatusReport
			if err := strict(raw, &r); err != nil {
				return err
			}
			return r.Validate()
		}},
		"deploy-status": {doc.Paths[ccapi.PathDeployStatus]["get"].Responses["200"].Content.JSON, func(raw []byte) error {
			var ds ccapi.DeployStatus
			if err := strict(raw, &ds); err != nil {
				return err
			}
			for _, d := range ds.Directives {
				if err := d.Validate(); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			examples := map[string]json.RawMessage{}
			if len(tc.media.Example) > 0 {
				examples["example"] = tc.media.Example
			}
			for k, v := range tc.media.Examples {
				examples[k] = v.Value
			}
			if len(examples) == 0 {
				t.Fatal("no example documented")
			}
			for k, ex := range examples {
				if err := tc.validate(ex); err != nil {
					t.Errorf("example %s: %v", k, err)
				}
			}
		})
	}
}

// strict decodes raw into v, refusing fields v does not have.
func strict(raw []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestAdminHandlerNeedsToken checks the admin API's authentication: no
// AdminTokens refuses everything, and with them only a listed token gets
// through, the API's own tokens included.
func TestAdminHandlerNeedsToken(t *testing.T) {
	cases := map[string]struct {
		reason        string
		adminTokens   []string
		authorization string
		want          int
	}{
		"NoAdminTokens":  {reason: "without admin tokens the admin API is closed, even to a token", authorization: "Bearer anything", want: http.StatusUnauthorized},
		"NoToken":        {reason: "a request without a token is refused", adminTokens: []string{"admin"}, want: http.StatusUnauthorized},
		"WrongToken":     {reason: "a wrong token is refused", adminTokens: []string{"admin"}, authorization: "Bearer nope", want: http.StatusUnauthorized},
		"APIToken":       {reason: "the API's token is not an admin token", adminTokens: []string{"admin"}, authorization: "Bearer reporter", want: http.StatusUnauthorized},
		"AdminToken":     {reason: "an admin token gets through", adminTokens: []string{"old", "admin"}, authorization: "Bearer admin", want: http.StatusOK},
		"RotatedToken":   {reason: "every listed token gets through, for a rotation", adminTokens: []string{"old", "admin"}, authorization: "Bearer old", want: http.StatusOK},
		"PrefixOfToken":  {reason: "a prefix of a token is not the token", adminTokens: []string{"admin"}, authorization: "Bearer adm", want: http.StatusUnauthorized},
		"NotBearerToken": {reason: "only a bearer token counts", adminTokens: []string{"admin"}, authorization: "Basic admin", want: http.StatusUnauthorized},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Options{Tokens: []string{"reporter"}, AdminTokens: tc.adminTokens}).AdminHandler()
			r := httptest.NewRequest(http.MethodGet, "/admin/state", nil)
			if tc.authorization != "" {
				r.Header.Set("Authorization", tc.authorization)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if diff := cmp.Diff(tc.want, rec.Code); diff != "" {
				t.Errorf("%s\nstatus: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestStoreStaysWithinBudget posts more than the server may keep and checks
// after every request that what it keeps, as charged, is within
// MaxBytes; that the oldest history went first, so the newest reports are
// still there; and that every workspace's state outlived the history.
func TestStoreStaysWithinBudget(t *testing.T) {
	const budget = 256 << 10
	s := New(Options{MaxBytes: budget})
	h := s.Handler()
	post := func(path, key string, body []byte) int {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set(ccapi.HeaderIdempotencyKey, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if got := s.Stored(); got.Bytes > got.MaxBytes || got.MaxBytes != budget {
			t.Fatalf("after POST %s: stored %d bytes of %d, want at most %d", path, got.Bytes, got.MaxBytes, budget)
		}
		return rec.Code
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	big := strings.Repeat("x", 20<<10)
	const workspaces, rounds = 3, 40
	for i := range rounds {
		for w := range workspaces {
			body, err := json.Marshal(ccapi.WorkspaceStatusReport{Namespace: "team-a", Name: fmt.Sprintf("ws-%d", w), ObservedAt: t0.Add(time.Duration(i) * time.Second),
				Status: &ccapi.WorkspaceStatus{Phase: "Ready", Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Message: big}}}})
			if err != nil {
				t.Fatal(err)
			}
			if code := post(ccapi.PathWorkspaceStatus, fmt.Sprintf("k-%d-%d", i, w), body); code != http.StatusOK {
				t.Fatalf("workspace report %d: %d", i, code)
			}
		}
		body, err := json.Marshal(ccapi.NodeHealthReport{Reporter: "r", SentAt: t0.Add(time.Duration(i) * time.Second),
			Nodes: []ccapi.NodeHealth{{Name: "n", Health: ccapi.HealthHealthy, Labels: map[string]string{"formspec.dev/x": big}}}})
		if err != nil {
			t.Fatal(err)
		}
		if code := post(ccapi.PathNodeHealth, "", body); code != http.StatusOK {
			t.Fatalf("node report %d: %d", i, code)
		}
	}
	// A body over a quarter of the budget could not be kept: refused.
	if code := post(ccapi.PathNodeHealth, "", []byte(`{"reporter":"r","sentAt":"2026-03-01T12:00:00Z","nodes":[],"x":"`+strings.Repeat("x", budget/4)+`"}`)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over a quarter of the budget: %d, want 413", code)
	}

	nodes := s.NodeReports()
	if len(nodes) == 0 || len(nodes) == rounds || !nodes[len(nodes)-1].SentAt.Equal(t0.Add((rounds-1)*time.Second)) {
		t.Errorf("kept %d node reports ending with %v: want some but not all, the newest last", len(nodes), nodes[len(nodes)-1].SentAt)
	}
	reports := s.WorkspaceReports()
	if len(reports) == 0 || len(reports) == rounds*workspaces || !reports[len(reports)-1].ObservedAt.Equal(t0.Add((rounds-1)*time.Second)) {
		t.Errorf("kept %d workspace reports: want some but not all, the newest last", len(reports))
	}
	if got := len(s.Workspaces()); got != workspaces {
		t.Errorf("kept the state of %d workspaces, want all %d", got, workspaces)
	}
	for k, ws := range s.Workspaces() {
		if !ws.ObservedAt.Equal(t0.Add((rounds - 1) * time.Second)) {
			t.Errorf("state of %s observed at %v, want the newest", k, ws.ObservedAt)
		}
	}
}

// TestStoreEvictsStateLast fills the budget with workspace states alone:
// once no history is left to evict, the state updated longest ago goes.
func TestStoreEvictsStateLast(t *testing.T) {
	st := newStore(1000)
	st.setWorkspace("a", time.Time{}, make([]byte, 300))
	st.setWorkspace("b", time.Time{}, make([]byte, 300))
	st.setWorkspace("a", time.Time{}, make([]byte, 300))
	add(st, &st.requests, Request{Path: "/"}, 100)
	st.setWorkspace("c", time.Time{}, make([]byte, 300))
	got := slices.Sorted(maps.Keys(st.workspaces))
	if diff := cmp.Diff([]string{"a", "c"}, got); diff != "" {
		t.Errorf("workspace states kept: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(0, len(st.requests.items)); diff != "" {
		t.Errorf("requests kept (history goes first): -want, +got:\n%s", diff)
	}
	if st.used > st.max {
		t.Errorf("used %d of %d", st.used, st.max)
	}
}
