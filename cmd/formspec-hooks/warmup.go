package main

import (
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/formspec/formspec-hooks/internal/hooks/decision"
	"github.com/formspec/formspec-hooks/internal/server"
)

// warmupFiles are copies of one fixture request of every hook, made from
// fixtures/ by `make fixtures` and kept in step by
// TestWarmCallsCoverEveryHook: warmup/<controller>/<hook>/<case>.json is
// fixtures/<controller>/<hook>/<case>/request.json, posted to
// /v1/<controller>/<hook>, with the fixtures' canary passwords replaced
// (warmupCopy), so that the binary carries no string a leak test looks for.
//
//go:embed warmup
var warmupFiles embed.FS

// warmUpWait bounds how long serve waits for the warm-up: a hook that
// hung on its fixture would otherwise keep the server from ever listening.
const warmUpWait = 10 * time.Second

// warmUp makes one call of every hook to itself (server.WarmUp), to hooks
// built from cfg without their effects outside the answer: nothing is
// handed to the reporter, no decision is counted, and only errors are
// logged (a failed hook, a panic with its stack; marked warmUp=true), so
// Cluster Control, the metrics and the logs never see a fixture otherwise.
// A fresh server takes some 10 ms over its first Workspace sync instead of
// a tenth of one, and in a rollout every replica pays that on its first
// calls of every hook. Its errors go to cfg.logger. It returns how many
// calls it made.
func warmUp(cfg hookConfig) (int, error) {
	quiet := slog.New(atLeast{cfg.logger.Handler(), slog.LevelWarn}).With("warmUp", true)
	cfg.reports = nil
	cfg.decisions = decision.Discard
	cfg.logger = quiet
	calls, err := warmCalls()
	if err != nil {
		return 0, err
	}
	return len(calls), server.WarmUp(quiet, hookRoutes(cfg), calls)
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

// atLeast passes on the records of min and above.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(attrs), h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}
