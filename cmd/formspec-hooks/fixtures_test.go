package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/decision"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/server"
)

var update = flag.Bool("update", false, "rewrite fixtures/**/response.json from the hooks' current output, and warmup/ from the fixtures' requests")

// fixturesDir is the repository's fixtures folder, seen from this package.
const fixturesDir = "../../fixtures"

// fixtureConfig is the configuration the golden responses were made with.
// The README's run command (make run) starts the server with the same
// values, so that every fixture can be checked there with curl.
func fixtureConfig() hookConfig {
	return hookConfig{
		resourceImage:     "formahub/formspec-resource",
		defaultVersion:    "latest",
		controlClusterURL: "http://formspec-ctl.formspec-system:7070",
		reporterURL:       "http://127.0.0.1:1", // nothing listens: no directives
		logger:            slog.New(slog.DiscardHandler),
		decisions:         decision.Discard,
	}
}

// fixtureCase is one fixtures/<controller>/<hook>/<case>/ folder.
type fixtureCase struct {
	dir  string
	path string // the URL path it is posted to
	// flags are the serve flags of its serve-flags file, if any.
	flags string
}

// fixtureFlagsFile, in a fixture's folder, holds serve flags the case is
// answered with beside fixtureConfig's: a case of a mode the install
// does not run by default (--workspace-claims=related). Only the flags
// fixtureConfigWith applies may be given; the node tests post to the
// installed server only the cases without one.
const fixtureFlagsFile = "serve-flags"

// fixtureConfigWith is fixtureConfig with the serve flags of a
// serve-flags file applied.
func fixtureConfigWith(t testing.TB, flags string) hookConfig {
	t.Helper()
	cfg := fixtureConfig()
	if flags == "" {
		return cfg
	}
	var f serveFlags
	set := newServeFlagSet(&f)
	if err := set.Parse(strings.Fields(flags)); err != nil {
		t.Fatalf("%s %q: %v", fixtureFlagsFile, flags, err)
	}
	set.Visit(func(fl *flag.Flag) {
		if fl.Name != "workspace-claims" {
			t.Fatalf("%s: --%s is not applied to fixtures; only --workspace-claims is", fixtureFlagsFile, fl.Name)
		}
	})
	src, err := workspace.ParseClaimsSource(f.workspaceClaims)
	if err != nil {
		t.Fatalf("%s: %v", fixtureFlagsFile, err)
	}
	cfg.workspaceClaims = src
	return cfg
}

// fixtureHandlers answers each fixture case with the handler of its
// flags, one handler per set of flags.
type fixtureHandlers struct {
	t  testing.TB
	by map[string]http.Handler
}

func newFixtureHandlers(t testing.TB) *fixtureHandlers {
	return &fixtureHandlers{t: t, by: map[string]http.Handler{}}
}

func (h *fixtureHandlers) For(fc fixtureCase) http.Handler {
	if h.by[fc.flags] == nil {
		h.by[fc.flags] = hookHandler(h.t, fixtureConfigWith(h.t, fc.flags), server.Config{})
	}
	return h.by[fc.flags]
}

func fixtureCases(t *testing.T) []fixtureCase {
	t.Helper()
	requests, err := filepath.Glob(filepath.Join(fixturesDir, "*", "*", "*", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) == 0 {
		t.Fatalf("no fixtures under %s", fixturesDir)
	}
	slices.Sort(requests)
	out := make([]fixtureCase, 0, len(requests))
	for _, r := range requests {
		dir := filepath.Dir(r)
		rel, _ := filepath.Rel(fixturesDir, filepath.Dir(dir))
		flags, err := os.ReadFile(filepath.Join(dir, fixtureFlagsFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		out = append(out, fixtureCase{dir: dir, path: "/v1/" + filepath.ToSlash(rel), flags: strings.TrimSpace(string(flags))})
	}
	return out
}

func fixtureHandler(t testing.TB) http.Handler {
	t.Helper()
	return hookHandler(t, fixtureConfig(), server.Config{})
}

// hookHandler is the hook listener's handler for the hooks of cfg, with
// the transport configured by srv (its Routes are cfg's).
func hookHandler(t testing.TB, cfg hookConfig, srv server.Config) http.Handler {
	t.Helper()
	srv.Routes = hookRoutes(cfg)
	s, err := server.New(srv)
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

func post(h http.Handler, path string, body []byte, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestFixtures posts every fixture request through the real HTTP handler and
// compares the answer with its golden response.
func TestFixtures(t *testing.T) {
	handlers := newFixtureHandlers(t)
	for _, fc := range fixtureCases(t) {
		h := handlers.For(fc)
		name, _ := filepath.Rel(fixturesDir, fc.dir)
		t.Run(filepath.ToSlash(name), func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(fc.dir, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			rec := post(h, fc.path, body, nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("POST %s: status %d, body %q", fc.path, rec.Code, rec.Body.String())
			}
			got := normalize(t, rec.Body.Bytes())
			golden := filepath.Join(fc.dir, "response.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("no golden response (run go test ./cmd/formspec-hooks -update): %v", err)
			}
			if diff := cmp.Diff(string(normalize(t, want)), string(got)); diff != "" {
				t.Errorf("POST %s: -want, +got:\n%s", fc.path, diff)
			}
		})
	}
}

// normalize re-indents JSON so that golden files are readable and
// comparisons ignore formatting only.
func normalize(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, raw)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// TestFixturesDeterministic sends each fixture twice: the bodies must be
// byte-identical with the same ETag, and that ETag in If-None-Match gets a
// 304 with no body.
func TestFixturesDeterministic(t *testing.T) {
	handlers := newFixtureHandlers(t)
	for _, fc := range fixtureCases(t) {
		h := handlers.For(fc)
		body, err := os.ReadFile(filepath.Join(fc.dir, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		first, second := post(h, fc.path, body, nil), post(h, fc.path, body, nil)
		etag := first.Header().Get("ETag")
		if etag == "" || etag != second.Header().Get("ETag") {
			t.Errorf("%s: ETags %q and %q, want equal and non-empty", fc.dir, etag, second.Header().Get("ETag"))
		}
		if !bytes.Equal(first.Body.Bytes(), second.Body.Bytes()) {
			t.Errorf("%s: two identical requests gave different bodies", fc.dir)
		}
		cached := post(h, fc.path, body, http.Header{"If-None-Match": {etag}})
		if cached.Code != http.StatusNotModified || cached.Body.Len() != 0 {
			t.Errorf("%s: If-None-Match %s: status %d with %d body bytes, want 304 and none", fc.dir, etag, cached.Code, cached.Body.Len())
		}
	}
}

// TestUndecodableObject shows that a request whose objects do not fit their
// types, or that has no parent (the caller's mistake), gets a one-line 400
// from the real hooks, not a 500. The transport's own refusals (bad JSON,
// content type, size, method) are internal/server's TestHandlerErrors.
func TestUndecodableObject(t *testing.T) {
	h := fixtureHandler(t)
	cases := map[string]struct {
		reason string
		path   string
		body   string
	}{
		"MissingParent": {
			reason: "The Workspace request type's own Validate refuses a request without its parent.",
			path:   "/v1/workspace/sync",
			body:   `{"children":{}}`,
		},
		"ParentStatus": {
			reason: "A Workspace whose status.conditions is a string.",
			path:   "/v1/workspace/sync",
			body:   `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n"},"spec":{"clusterClass":"c"},"status":{"conditions":"x"}},"children":{},"related":{}}`,
		},
		"Child": {
			reason: "An observed Deployment whose replicas is a string.",
			path:   "/v1/workspace/sync",
			body:   `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n"},"spec":{"clusterClass":"c"}},"children":{"Deployment.apps/v1":{"n/a":{"spec":{"replicas":"two"}}}},"related":{}}`,
		},
		"Customize": {
			reason: "A customize request whose parent metadata is a list.",
			path:   "/v1/workspace/customize",
			body:   `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":[],"spec":{}}}`,
		},
		"ChildNotObjectClassMissing": {
			reason: "A child that is not a JSON object, in a sync that would freeze the children because the class is missing.",
			path:   "/v1/workspace/sync",
			body:   `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n"},"spec":{"clusterClass":"gone"}},"children":{"ConfigMap.v1":{"n/a-config":7}},"related":{}}`,
		},
		"ChildNotObjectFinalize": {
			reason: "A child that is not a JSON object, in finalize.",
			path:   "/v1/workspace/finalize",
			body:   `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n","deletionTimestamp":"2026-01-11T08:00:00Z"},"spec":{"clusterClass":"c"}},"children":{"Deployment.apps/v1":{"n/a":"x"}},"related":{},"finalizing":true}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := post(h, tc.path, []byte(tc.body), nil)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s\nstatus: got %d, want 400 (body %q)", tc.reason, rec.Code, rec.Body.String())
			}
			if got := rec.Body.String(); strings.Count(strings.TrimSuffix(got, "\n"), "\n") != 0 {
				t.Errorf("%s\nerror body %q: want one line", tc.reason, got)
			}
		})
	}
}

// TestInvalidSpecIsADecision shows that a Workspace whose spec does not fit
// its types (a passthrough field of the wrong type, which the API server
// may let through) or breaks a CRD limit the hook relies on is answered
// with a 200: customize still answers, and sync reports InvalidSpec and
// keeps the children.
func TestInvalidSpecIsADecision(t *testing.T) {
	h := fixtureHandler(t)
	tooMany := make([]string, v1alpha1.MaxWorkspaceDatastores+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf(`{"name":"db-%d"}`, i)
	}
	cases := map[string]struct {
		reason    string
		spec      string
		customize string
		message   string
	}{
		"WrongType": {
			reason:    "A passthrough field of the wrong type is named in the message.",
			spec:      `{"clusterClass":"c","pod":{"tolerations":[{"key":"k","tolerationSeconds":"abc"}]}}`,
			customize: `{"relatedResources":[{"apiVersion":"formspec.dev/v1alpha1","resource":"clusterclasses","names":["c"]}]}`,
			message:   "spec.pod.tolerations.0.tolerationSeconds must be int64, not string; existing children are kept unchanged until the spec is fixed",
		},
		"TooManyDatastores": {
			reason:  "The CRD's maxItems on spec.datastores holds in the hook too.",
			spec:    `{"clusterClass":"c","datastores":[` + strings.Join(tooMany, ",") + `]}`,
			message: "spec.datastores has 33 entries, more than the 32 allowed; existing children are kept unchanged until the spec is fixed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parent := `{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n"},"spec":` + tc.spec + `}`
			custom := post(h, "/v1/workspace/customize", []byte(`{"parent":`+parent+`}`), nil)
			if custom.Code != http.StatusOK {
				t.Errorf("customize: status %d, want 200", custom.Code)
			}
			if diff := cmp.Diff(tc.customize, strings.TrimSpace(custom.Body.String())); tc.customize != "" && diff != "" {
				t.Errorf("customize: body -want, +got:\n%s", diff)
			}
			children := `{"ConfigMap.v1":{"n/a-config":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-config","namespace":"n"},"data":{"k":"v"}}}}`
			rec := post(h, "/v1/workspace/sync", []byte(`{"parent":`+parent+`,"children":`+children+`,"related":{}}`), nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("sync: status %d, body %q; want 200", rec.Code, rec.Body)
			}
			var resp struct {
				Status struct {
					Phase      string             `json:"phase"`
					Conditions []metav1.Condition `json:"conditions"`
				} `json:"status"`
				Children []map[string]any `json:"children"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			degraded := meta.FindStatusCondition(resp.Status.Conditions, "Degraded")
			got := []string{resp.Status.Phase}
			if degraded != nil {
				got = append(got, degraded.Reason, degraded.Message)
			}
			want := []string{"Degraded", "InvalidSpec", tc.message}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sync status: -want, +got:\n%s", diff)
			}
			if len(resp.Children) != 1 || resp.Children[0]["kind"] != "ConfigMap" {
				t.Errorf("sync children: got %v, want the observed ConfigMap kept", resp.Children)
			}
		})
	}
}
