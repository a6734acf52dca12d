package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/handoff"
	"github.com/formspec/formspec-hooks/hooks/server"
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
		t.Errorf("warmUp made %d calls, want the %d of fixtures.Warmup", n, len(calls))
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
// hook, and each is a copy of its fixture's request.json, byte for byte.
// With -update (make fixtures) it copies the fixtures' requests anew.
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
		if *update {
			if err := os.WriteFile(filepath.Join("warmup", filepath.FromSlash(c.Name)+".json"), golden, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(golden, c.Body) {
			t.Errorf("warmup/%s.json differs from fixtures/%s/request.json: run make fixtures", c.Name, c.Name)
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
