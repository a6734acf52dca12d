package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/handoff"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// countingRecorder counts the decisions recorded.
type countingRecorder struct{ n atomic.Int64 }

func (r *countingRecorder) Record(string, string, string) { r.n.Add(1) }

// TestWarmUp makes the warm-up calls with a hand-off queue, a decision
// counter and a logger that would each show an effect, and finds none:
// the same calls made of the served hooks do show them.
func TestWarmUp(t *testing.T) {
	effects := func() (hookConfig, *handoff.Client, *countingRecorder, *bytes.Buffer) {
		cfg := fixtureConfig()
		reports, err := handoff.New("http://127.0.0.1:1", handoff.Options{})
		if err != nil {
			t.Fatal(err)
		}
		decisions, logs := &countingRecorder{}, &bytes.Buffer{}
		cfg.reports, cfg.decisions = reports, decisions
		cfg.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		return cfg, reports, decisions, logs
	}

	cfg, reports, decisions, logs := effects()
	n, err := warmUp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := warmCalls()
	if err != nil {
		t.Fatal(err)
	}
	if n != len(calls) || n == 0 {
		t.Errorf("warmUp made %d calls, want the %d of warmup/", n, len(calls))
	}
	if reports.Pending() != 0 || decisions.n.Load() != 0 || logs.Len() != 0 {
		t.Errorf("the warm-up had effects: %d observations handed off, %d decisions counted, logs %q",
			reports.Pending(), decisions.n.Load(), logs.String())
	}

	// The control: the served hooks, given the same calls, hand off and
	// count. Without it the check above could pass on calls that reach
	// no hook.
	cfg, reports, decisions, _ = effects()
	h := hookHandler(t, cfg, server.Config{})
	for _, c := range calls {
		if rec := post(h, c.Path, c.Body, nil); rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", c.Name, rec.Code)
		}
	}
	if reports.Pending() == 0 || decisions.n.Load() == 0 {
		t.Errorf("the served hooks handed off %d observations and counted %d decisions for the warm-up calls; want some of each",
			reports.Pending(), decisions.n.Load())
	}
}

// TestWarmCallsCoverEveryHook keeps the warm-up calls in step with the
// routes and the fixtures: every hook has a warm-up call, every call a
// hook, and each is its fixture's request.json as warmupCopy makes it,
// with no canary password left in it. With -update (make fixtures) it
// copies the fixtures' requests anew.
func TestWarmCallsCoverEveryHook(t *testing.T) {
	calls, err := warmCalls()
	if err != nil {
		t.Fatal(err)
	}
	var warmed []string
	for _, c := range calls {
		warmed = append(warmed, c.Path)
		golden, err := os.ReadFile(filepath.Join(fixturesDir, filepath.FromSlash(c.Name), "request.json"))
		if err != nil {
			t.Errorf("warmup/%s.json is no fixture's copy: %v", c.Name, err)
			continue
		}
		want := warmupCopy(golden)
		if *update {
			if err := os.WriteFile(filepath.Join("warmup", filepath.FromSlash(c.Name)+".json"), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(want, c.Body) {
			t.Errorf("warmup/%s.json is not its fixture's copy (fixtures/%s/request.json): run make fixtures", c.Name, c.Name)
		}
		for _, canary := range []string{claimstest.Password, claimstest.AdminPassword} {
			if bytes.Contains(c.Body, []byte(canary)) || bytes.Contains(c.Body, []byte(base64.StdEncoding.EncodeToString([]byte(canary)))) {
				t.Errorf("warmup/%s.json carries the canary password %q into the binary", c.Name, canary)
			}
		}
	}
	var routes []string
	for _, r := range hookRoutes(fixtureConfig()) {
		routes = append(routes, r.Path)
		if !slices.Contains(warmed, r.Path) {
			t.Errorf("%s has no warm-up call: copy one of its fixtures' request.json into warmup/", r.Path)
		}
	}
	for _, c := range calls {
		if !slices.Contains(routes, c.Path) {
			t.Errorf("warm-up call %s goes to %s, which no hook serves", c.Name, c.Path)
		}
	}
}

// warmupCopy is a fixture request as warmup/ keeps it: the canary
// passwords, which the tests search outputs and logs for, replaced by
// other values of their own, so that the binary carries none of them. The
// claims stay granted: a grant signs no password.
func warmupCopy(fixture []byte) []byte {
	for _, r := range []struct{ canary, other string }{
		{claimstest.Password, "warm-up-password"},
		{claimstest.AdminPassword, "warm-up-admin-password"},
	} {
		enc := base64.StdEncoding.EncodeToString
		fixture = bytes.ReplaceAll(fixture, []byte(enc([]byte(r.canary))), []byte(enc([]byte(r.other))))
		fixture = bytes.ReplaceAll(fixture, []byte(r.canary), []byte(r.other))
	}
	return fixture
}

// TestWarmUpBounded: serve says how the warm-up went, and a warm-up that
// hangs does not keep it from serving.
func TestWarmUpBounded(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := map[string]struct {
		warm func() (int, error)
		want string
	}{
		"Done":   {warm: func() (int, error) { return 13, nil }, want: `level=INFO msg="hooks warmed up" calls=13`},
		"Failed": {warm: func() (int, error) { return 13, errors.New("warm-up calls failed: x") }, want: `level=WARN msg="warm-up incomplete; the first calls of some hooks may be slower" calls=13`},
		"Hung":   {warm: func() (int, error) { <-release; return 13, nil }, want: `level=WARN msg="warm-up unfinished; serving without waiting for it" waited=10ms`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			warmUpBounded(slog.New(slog.NewTextHandler(&logs, nil)), 10*time.Millisecond, tc.warm)
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("log %q lacks %q", logs.String(), tc.want)
			}
		})
	}
}
