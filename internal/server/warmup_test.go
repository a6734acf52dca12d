package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

func TestWarmUp(t *testing.T) {
	var parents []string
	hook := func(_ context.Context, req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
		parents = append(parents, string(req.Parent))
		return &metacontroller.CompositeResponse{}, nil
	}
	routes := []Route{HookRoute("/v1/x/sync", hook)}

	if err := WarmUp(nil, routes, []WarmCall{{Name: "x/sync/a", Path: "/v1/x/sync", Body: []byte(validBody)}}); err != nil {
		t.Fatalf("WarmUp = %v, want nil", err)
	}
	if len(parents) != 1 || !strings.Contains(parents[0], `"name":"ws"`) {
		t.Errorf("the hook saw %q, want the call's one parent", parents)
	}

	// Every call is made, and the error names each that failed.
	parents = nil
	err := WarmUp(nil, routes, []WarmCall{
		{Name: "x/sync/not-json", Path: "/v1/x/sync", Body: []byte("{")},
		{Name: "x/sync/a", Path: "/v1/x/sync", Body: []byte(validBody)},
		{Name: "y/sync/a", Path: "/v1/y/sync", Body: []byte(validBody)},
	})
	if err == nil || !strings.Contains(err.Error(), "/v1/x/sync (x/sync/not-json) answered 400") ||
		!strings.Contains(err.Error(), "/v1/y/sync (y/sync/a) answered 404") || strings.Contains(err.Error(), "(x/sync/a)") {
		t.Errorf("WarmUp = %v, want the bad body's 400 and the unknown path's 404 named, and nothing else", err)
	}
	if len(parents) != 1 {
		t.Errorf("the hook was called %d times, want once (the good call)", len(parents))
	}
}

// TestWarmUpLogsPanics: a hook that panics while warming up is named in
// the error, and its stack is in the log, for the operator to report.
func TestWarmUpLogsPanics(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	routes := []Route{HookRoute("/v1/x/sync", panickingHook)}
	err := WarmUp(logger, routes, []WarmCall{{Name: "x/sync/a", Path: "/v1/x/sync", Body: []byte(validBody)}})
	if err == nil || !strings.Contains(err.Error(), "(x/sync/a) answered 500") {
		t.Errorf("WarmUp = %v, want the panicking call named with its 500", err)
	}
	if !strings.Contains(logs.String(), "panic serving hook") || !strings.Contains(logs.String(), "index out of range") || !strings.Contains(logs.String(), "stack=") {
		t.Errorf("the log lacks the panic and its stack:\n%s", logs.String())
	}
}
