package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// blockingHook signals entered and waits for release, to hold a request in
// flight for as long as a test needs.
type blockingHook struct {
	entered chan struct{}
	release chan struct{}
}

func newBlockingHook() *blockingHook {
	return &blockingHook{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (b *blockingHook) hook(ctx context.Context, _ *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &metacontroller.CompositeResponse{Status: map[string]any{"done": true}, Children: []any{}}, nil
}

func TestMaxInFlight(t *testing.T) {
	block := newBlockingHook()
	srv, err := New(Config{Routes: []Route{HookRoute("/v1/block/sync", block.hook)}, MaxInFlight: 1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := srv.Handler()
	req := request{path: "/v1/block/sync", contentType: "application/json", body: validBody}

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- do(h, req) }()
	<-block.entered

	rejected := do(h, req)
	if diff := cmp.Diff(reply{Code: 429, ContentType: jsonType, Body: errBody("too many requests in flight")}, replyOf(rejected, true)); diff != "" {
		t.Errorf("request over the limit: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff("1", rejected.Header().Get("Retry-After")); diff != "" {
		t.Errorf("Retry-After: -want, +got:\n%s", diff)
	}

	close(block.release)
	if diff := cmp.Diff(200, (<-first).Code); diff != "" {
		t.Errorf("request within the limit: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(200, do(h, req).Code); diff != "" {
		t.Errorf("request after the slot was freed: -want, +got:\n%s", diff)
	}
}

func writeFile(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// An explicit mtime makes the change visible even on file systems with
	// coarse timestamps.
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestBearerTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "# rotated monthly\ntoken-old\n\n  token-new  \n", time.Unix(1000, 0))
	tokens := filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"})
	h := testRouter(t, Config{Tokens: tokens})
	unauthorized := reply{Code: 401, ContentType: jsonType, Body: errBody("missing or invalid bearer token")}

	cases := map[string]struct {
		reason        string
		method        string
		path          string
		authorization string
		want          int
	}{
		"NoHeader":        {reason: "Hooks need a token.", path: "/v1/echo/sync", want: 401},
		"WrongToken":      {reason: "An unknown token is refused.", path: "/v1/echo/sync", authorization: "Bearer token-older", want: 401},
		"PrefixOfToken":   {reason: "A prefix of a valid token is not valid.", path: "/v1/echo/sync", authorization: "Bearer token-", want: 401},
		"WrongScheme":     {reason: "Only the Bearer scheme carries tokens.", path: "/v1/echo/sync", authorization: "Basic token-old", want: 401},
		"EmptyToken":      {reason: "An empty token is no token.", path: "/v1/echo/sync", authorization: "Bearer ", want: 401},
		"CommentLine":     {reason: "Comment lines are not tokens.", path: "/v1/echo/sync", authorization: "Bearer # rotated monthly", want: 401},
		"OldToken":        {reason: "Either of the listed tokens is accepted.", path: "/v1/echo/sync", authorization: "Bearer token-old", want: 200},
		"NewToken":        {reason: "Either of the listed tokens is accepted; surrounding spaces in the file are not part of it.", path: "/v1/echo/sync", authorization: "Bearer token-new", want: 200},
		"LowerCaseScheme": {reason: "The scheme is case-insensitive.", path: "/v1/echo/sync", authorization: "bearer token-new", want: 200},
		"Healthz":         {reason: "Probes answer on the metrics listener only, not unauthenticated here.", method: http.MethodGet, path: "/healthz", want: 404},
		"Readyz":          {reason: "Probes answer on the metrics listener only, not unauthenticated here.", method: http.MethodGet, path: "/readyz", want: 404},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := request{method: tc.method, path: tc.path, contentType: "application/json", body: validBody}
			if tc.authorization != "" {
				req.header = map[string]string{"Authorization": tc.authorization}
			}
			rec := do(h, req)
			if diff := cmp.Diff(tc.want, rec.Code); diff != "" {
				t.Errorf("%s\ncode: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want == 401 {
				if diff := cmp.Diff(unauthorized, replyOf(rec, true)); diff != "" {
					t.Errorf("%s\nresponse: -want, +got:\n%s", tc.reason, diff)
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s\n401 without WWW-Authenticate", tc.reason)
				}
			}
		})
	}
}

// TestTokenFileRotation rotates the token file under a router: tokens are
// added and removed without a restart, and a file that breaks refuses
// every token until it is fixed (fail closed).
func TestTokenFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "token-a\n", time.Unix(1000, 0))
	h := testRouter(t, Config{Tokens: filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"})})
	type check struct{ A, B, C bool }
	accepted := func() check {
		ok := func(tok string) bool {
			return do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: validBody,
				header: map[string]string{"Authorization": "Bearer " + tok}}).Code == http.StatusOK
		}
		return check{A: ok("token-a"), B: ok("token-b"), C: ok("token-c")}
	}

	steps := []struct {
		reason  string
		content *string
		mtime   int64
		want    check
	}{
		{reason: "Only the first token at start.", content: ptr("token-a\n"), mtime: 1000, want: check{A: true}},
		{reason: "Adding a token keeps the old one during rotation.", content: ptr("token-a\ntoken-b\n"), mtime: 1001, want: check{A: true, B: true}},
		{reason: "Removing the old token finishes the rotation.", content: ptr("token-b\n"), mtime: 1002, want: check{B: true}},
		{reason: "Same size and content length, new token: a changed mtime is enough.", content: ptr("token-c\n"), mtime: 1003, want: check{C: true}},
		{reason: "An emptied file refuses every token, the old ones included.", content: ptr("\n"), mtime: 1004, want: check{}},
		{reason: "A fixed file is accepted again.", content: ptr("token-c\n"), mtime: 1005, want: check{C: true}},
		{reason: "A deleted file refuses every token.", mtime: 1006, want: check{}},
	}
	for i, s := range steps {
		if s.content != nil {
			writeFile(t, path, *s.content, time.Unix(s.mtime, 0))
		} else if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, accepted()); diff != "" {
			t.Errorf("step %d: %s\naccepted tokens: -want, +got:\n%s", i, s.reason, diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestMetrics(t *testing.T) {
	srv, err := New(Config{Routes: []Route{
		HookRoute("/v1/echo/sync", echoHook),
		HookRoute("/v1/panic/sync", panickingHook),
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.cfg.Metrics.Record("resourceclaim-sync", "denied", "SignatureExpired")
	h := srv.Handler()
	do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: validBody})
	do(h, request{path: "/v1/echo/sync", contentType: "text/plain", body: validBody})
	do(h, request{path: "/v1/panic/sync", contentType: "application/json", body: validBody})
	do(h, request{method: http.MethodGet, path: "/healthz"})

	scrape := do(srv.MetricsHandler(), request{method: http.MethodGet, path: "/metrics"})
	if scrape.Code != http.StatusOK {
		t.Fatalf("scrape: code %d", scrape.Code)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(scrape.Body.String(), "\n") {
		lines[l] = true
	}
	want := []string{
		`formspec_hooks_requests_total{code="200",hook="echo-sync"} 1`,
		`formspec_hooks_requests_total{code="400",hook="echo-sync"} 1`,
		`formspec_hooks_requests_total{code="500",hook="panic-sync"} 1`,
		`formspec_hooks_panics_total{hook="panic-sync"} 1`,
		`formspec_hooks_request_duration_seconds_count{hook="echo-sync"} 2`,
		`formspec_hooks_request_size_bytes_count{hook="echo-sync"} 2`,
		`formspec_hooks_request_size_bytes_sum{hook="echo-sync"} ` + strconv.Itoa(2*len(validBody)),
		`formspec_hooks_decisions_total{decision="denied",hook="resourceclaim-sync",reason="SignatureExpired"} 1`,
		`formspec_hooks_in_flight_requests 0`,
	}
	var missing []string
	for _, w := range want {
		if !lines[w] {
			missing = append(missing, w)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("series missing from the scrape: -want, +got:\n%s\nscrape:\n%s", diff, scrape.Body)
	}
	if strings.Contains(scrape.Body.String(), `hook="healthz"`) {
		t.Errorf("probes are counted as hooks")
	}
}
