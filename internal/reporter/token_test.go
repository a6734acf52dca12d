package reporter

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTokenFileIsReRead checks that a rotated token is used without a
// restart, and that a token file gone missing or empty sends no token at
// all rather than the last one read (a revoked token is never sent again).
func TestTokenFileIsReRead(t *testing.T) {
	p := writeFile(t, "token", "first\n")
	tok, err := newFileToken(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		reason  string
		write   *string
		remove  bool
		want    string
		wantErr error
	}{
		{reason: "initial token", want: "first"},
		{reason: "rotated token (different size, so the change is seen even within one mtime tick)", write: ptr("second-token"), want: "second-token"},
		{reason: "an emptied file sends no token", write: ptr(""), wantErr: errNoToken},
		{reason: "a token written again is sent", write: ptr("third-token\n"), want: "third-token"},
		{reason: "two tokens are not guessed between", write: ptr("a\nb\n"), wantErr: cmpopts.AnyError},
		{reason: "a removed file sends no token", remove: true, wantErr: errNoToken},
	}
	for _, s := range steps {
		if s.write != nil {
			if err := os.WriteFile(p, []byte(*s.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if s.remove {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tok.get()
		if diff := cmp.Diff(s.wantErr, err, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s: error: -want, +got:\n%s", s.reason, diff)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: token: -want, +got:\n%s", s.reason, diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestTokenFileAtStart covers the token file as the reporter finds it at
// start. The Secret behind it is optional, so missing and empty are normal.
func TestTokenFileAtStart(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		reason    string
		path      string
		wantNew   error
		wantGet   error
		wantToken string
	}{
		"Present": {
			reason:    "A token file is read at start.",
			path:      writeFile(t, "token", "s3cret\n"),
			wantToken: "s3cret",
		},
		"Missing": {
			reason:  "A missing file (optional Secret not created) is not fatal; calls carry no token.",
			path:    filepath.Join(dir, "nope"),
			wantGet: errNoToken,
		},
		"Empty": {
			reason:  "An empty file is treated like a missing one.",
			path:    writeFile(t, "token", " \n"),
			wantGet: errNoToken,
		},
		"Unreadable": {
			reason:  "A path that exists but cannot be read as a file is a broken pod spec and stops the reporter at start.",
			path:    dir,
			wantNew: cmpopts.AnyError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tok, err := newFileToken(tc.path, nil)
			if diff := cmp.Diff(tc.wantNew, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nnewFileToken: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			got, err := tok.get()
			if diff := cmp.Diff(tc.wantGet, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nget error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantToken, got); diff != "" {
				t.Errorf("%s\nget token: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTokenFileAppearsLater starts the reporter before the optional Secret
// exists: calls go out without Authorization, the workspace report refused
// for it is kept rather than dropped, and once the file appears the calls
// carry the token and the report lands.
func TestTokenFileAppearsLater(t *testing.T) {
	cc := clustercontrol.New(clustercontrol.Options{Tokens: []string{"s3cret"}})
	var mu sync.Mutex
	var auth []string // Authorization of each workspace-status call, in order
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ccapi.PathWorkspaceStatus {
			mu.Lock()
			auth = append(auth, r.Header.Get("Authorization"))
			mu.Unlock()
		}
		cc.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(auth)
	}

	logs := &testsync.Buffer{}
	cfg := fastConfig(hs.URL)
	cfg.TokenFile = filepath.Join(t.TempDir(), "token")
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	// A clock that never moves lets exactly one warning through the
	// rate limiter, however many calls go out without a token.
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg.now = func() time.Time { return now }
	r := newReporter(t, cfg)
	runLoops(t, r.runWorkspaceSender)
	if err := r.Observe(wsObs("team-a", "shop", "Ready", 2, "")); err != nil {
		t.Fatal(err)
	}

	testsync.WaitFor(t, "two calls without a token", func() bool { return len(calls()) >= 2 })
	for i, a := range calls() {
		if diff := cmp.Diff("", a); diff != "" {
			t.Errorf("Authorization of call %d before the token file exists: -want, +got:\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(1, r.st.counts().Pending); diff != "" {
		t.Errorf("pending reports while refused for want of a token: -want, +got:\n%s", diff)
	}

	// Rename, as the kubelet swaps a Secret in atomically: a reader must not
	// catch the file half-written.
	tmp := writeFile(t, "token.new", "s3cret\n")
	if err := os.Rename(tmp, cfg.TokenFile); err != nil {
		t.Fatal(err)
	}
	testsync.WaitFor(t, "the report to land once the token exists", func() bool { return len(cc.WorkspaceReports()) == 1 })
	got := calls()
	if diff := cmp.Diff("Bearer s3cret", got[len(got)-1]); diff != "" {
		t.Errorf("Authorization once the token file exists: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(0.0, testutil.ToFloat64(r.m.dropped.WithLabelValues(dropRejected, ""))); diff != "" {
		t.Errorf("dropped{reason=rejected}: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(1, strings.Count(logs.String(), "without a bearer token")); diff != "" {
		t.Errorf("missing-token warnings (rate-limited): -want, +got:\n%s\nlogs:\n%s", diff, logs.String())
	}
}

// TestCredentialsFileMetric shows formspec_reporter_credentials_file_ok
// follow the token file: 1 with one token, and while the optional Secret
// is missing; 0 while the file holds something the reporter will not send.
func TestCredentialsFileMetric(t *testing.T) {
	p := writeFile(t, "token", "first\n")
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.TokenFile = p
	r := newReporter(t, cfg)
	ok := func() float64 {
		t.Helper()
		families, err := r.m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "formspec_reporter_credentials_file_ok" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("formspec_reporter_credentials_file_ok is not exported")
		return 0
	}
	steps := []struct {
		reason string
		write  *string
		remove bool
		want   float64
	}{
		{reason: "one token", want: 1},
		{reason: "two tokens: broken", write: ptr("a\nb\n"), want: 0},
		{reason: "fixed", write: ptr("second\n"), want: 1},
		{reason: "missing: the optional Secret is not there yet", remove: true, want: 1},
	}
	for _, s := range steps {
		if s.write != nil {
			if err := os.WriteFile(p, []byte(*s.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if s.remove {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		if got := ok(); got != s.want {
			t.Errorf("%s: credentials_file_ok = %v, want %v", s.reason, got, s.want)
		}
	}
}

// TestErrorBodyHidesToken checks that an error page echoing the request's
// headers, as some proxies' do, does not carry the bearer token into the
// error the reporter logs, and that the rest of the page still does.
func TestErrorBodyHidesToken(t *testing.T) {
	const token = "s3cret-bearer-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway; you sent Authorization: "+r.Header.Get("Authorization"), http.StatusBadGateway)
	}))
	defer srv.Close()
	tok, err := newFileToken(writeFile(t, "token", token+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := &ccClient{base: u, http: srv.Client(), token: tok, timeout: 5 * time.Second, now: time.Now}
	res := c.do(t.Context(), http.MethodGet, "/v1/deploy-status", nil, "", nil)
	if res.err == nil || res.status != http.StatusBadGateway {
		t.Fatalf("do: status %d, err %v; want 502 and an error", res.status, res.err)
	}
	if msg := res.err.Error(); strings.Contains(msg, token) || !strings.Contains(msg, "you sent Authorization: Bearer [token]") {
		t.Errorf("error %q: want the page without the token, which shows as [token]", msg)
	}
}

// TestErrorBodyHidesTokenCut checks that a token in an error page is
// hidden however the page holds it: where the read limit falls inside
// it, where a proxy cut it, and more than once; and that a page without
// it is left as it was.
func TestErrorBodyHidesTokenCut(t *testing.T) {
	const token = "s3cret-bearer-token-0123456789abcdef"
	pad := strings.Repeat("x", errorBodyLimit-len("Authorization: Bearer ")-10)
	cases := map[string]struct {
		page string
		want string // what the logged page must hold
	}{
		"the limit falls in the token": {
			page: pad + "Authorization: Bearer " + token + " and more",
			want: "Authorization: Bearer [token]",
		},
		"a proxy cut the token": {
			page: "you sent Authorization: Bearer " + token[:20] + "...",
			want: "you sent Authorization: Bearer [token]...",
		},
		"the token's end alone": {
			page: "header value ended with " + token[10:] + "; try again",
			want: "header value ended with [token]; try again",
		},
		"twice": {
			page: token + " / " + token,
			want: "[token] / [token]",
		},
		"no token": {
			page: "upstream connect error or disconnect/reset before headers",
			want: "upstream connect error or disconnect/reset before headers",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := errorBody(strings.NewReader(tc.page), token)
			if !strings.Contains(got, tc.want) {
				t.Errorf("errorBody = %q, want it to hold %q", got, tc.want)
			}
			for i := 0; i+tokenFragment <= len(token); i++ {
				if part := token[i : i+tokenFragment]; strings.Contains(got, part) {
					t.Fatalf("errorBody = %q holds %q, a part of the token", got, part)
				}
			}
			if len(got) > errorBodyLimit+len("[token]") {
				t.Errorf("errorBody kept %d bytes, more than the limit of %d", len(got), errorBodyLimit)
			}
		})
	}
}
