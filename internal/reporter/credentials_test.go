package reporter

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/internal/weburl"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

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
	if diff := cmp.Diff(1, r.st.Counts().Pending); diff != "" {
		t.Errorf("pending reports while refused for want of a token: -want, +got:\n%s", diff)
	}

	// Rename, as the kubelet swaps a Secret in atomically: a reader must not
	// catch the file half-written.
	tmp := cfg.TokenFile + ".new"
	if err := os.WriteFile(tmp, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg.TokenFile); err != nil {
		t.Fatal(err)
	}
	testsync.WaitFor(t, "the report to land once the token exists", func() bool { return len(cc.WorkspaceReports()) == 1 })
	got := calls()
	if diff := cmp.Diff("Bearer s3cret", got[len(got)-1]); diff != "" {
		t.Errorf("Authorization once the token file exists: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(0.0, testutil.ToFloat64(r.m.dropped.WithLabelValues(state.DropRejected, ""))); diff != "" {
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
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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

func TestParseClusterControlURL(t *testing.T) {
	cases := map[string]struct {
		reason string
		cfg    Config
		want   error
	}{
		"HTTPS": {
			reason: "https with a token is what the install uses.",
			cfg:    Config{ClusterControlURL: "https://formspec-ctl.formspec-system:7070", TokenFile: "token"},
		},
		"PlainHTTPWithToken": {
			reason: "A token over plain HTTP off the loopback is refused.",
			cfg:    Config{ClusterControlURL: "http://formspec-ctl.formspec-system:7070", TokenFile: "token"},
			want:   ErrPlainHTTP,
		},
		"PlainHTTPWithTokenAllowed": {
			reason: "InsecureHTTP (--insecure-http) lets it through.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070", TokenFile: "token", InsecureHTTP: true},
		},
		"PlainHTTPWithoutToken": {
			reason: "Without a token there is no credential to lose; New warns instead.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070"},
		},
		"LoopbackWithToken": {
			reason: "On the loopback (make run) nothing crosses a network.",
			cfg:    Config{ClusterControlURL: "http://127.0.0.1:8480", TokenFile: "token"},
		},
		"LocalhostWithToken": {
			reason: "localhost is the loopback too.",
			cfg:    Config{ClusterControlURL: "http://localhost:8480", TokenFile: "token"},
		},
		"Query": {
			reason: "A query is refused before anything else, even where plain HTTP would be too.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070/?token=x", TokenFile: "token"},
			want:   weburl.ErrQuery,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tc.cfg.ParseClusterControlURL("--cluster-control-url")
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(30 * time.Second)
	type call struct {
		at       time.Duration
		wantOK   bool
		wantHeld int
	}
	calls := []call{{0, true, 0}, {time.Second, false, 0}, {10 * time.Second, false, 0}, {31 * time.Second, true, 2}}
	for _, c := range calls {
		ok, held := l.allow("ep", t0.Add(c.at))
		if diff := cmp.Diff(call{c.at, c.wantOK, c.wantHeld}, call{c.at, ok, held}, cmp.AllowUnexported(call{})); diff != "" {
			t.Errorf("allow at %v (-want, +got):\n%s", c.at, diff)
		}
	}
}
