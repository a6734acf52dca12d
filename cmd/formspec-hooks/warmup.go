package main

import (
	"embed"
	"io/fs"
	"log/slog"
	"path"
	"strings"

	"github.com/formspec/formspec-hooks/hooks/decision"
	"github.com/formspec/formspec-hooks/hooks/server"
)

// warmupFiles are copies of one fixture request of every hook, made from
// fixtures/ by `make fixtures` and kept equal to them by
// TestWarmCallsCoverEveryHook: warmup/<controller>/<hook>/<case>.json is
// fixtures/<controller>/<hook>/<case>/request.json, posted to
// /v1/<controller>/<hook>.
//
//go:embed warmup
var warmupFiles embed.FS

// warmUp makes one call of every hook to itself (server.WarmUp), to hooks
// built from cfg without their effects outside the answer: nothing is
// handed to the reporter, no decision is counted and nothing is logged, so
// Cluster Control, the metrics and the logs never see a fixture. A fresh
// server otherwise takes some 10 ms over its first Workspace sync instead
// of a tenth of one, and in a rollout every replica pays that on its first
// calls of every hook. It returns how many calls it made.
func warmUp(cfg hookConfig) (int, error) {
	cfg.reports = nil
	cfg.decisions = decision.Discard
	cfg.logger = slog.New(slog.DiscardHandler)
	calls, err := warmCalls()
	if err != nil {
		return 0, err
	}
	return len(calls), server.WarmUp(hookRoutes(cfg), calls)
}

// warmCalls are the requests of warmupFiles, each with the path its
// folders name.
func warmCalls() ([]server.WarmCall, error) {
	files, err := fs.Glob(warmupFiles, "warmup/*/*/*.json")
	if err != nil {
		return nil, err
	}
	calls := make([]server.WarmCall, 0, len(files))
	for _, f := range files {
		body, err := warmupFiles.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(f, "warmup/"), ".json")
		calls = append(calls, server.WarmCall{Name: name, Path: "/v1/" + path.Dir(name), Body: body})
	}
	return calls, nil
}
