package nodehealth

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/internal/testkit/recorder"
)

// TestMalformedRequestsOverHTTP posts malformed bodies to both hooks through
// the real transport: each is a 400, never a 500, and nothing is logged as
// an error (a 500 is for bugs, and pages someone).
func TestMalformedRequestsOverHTTP(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	type decorator = server.Hook[metacontroller.DecoratorRequest, metacontroller.DecoratorResponse]
	hooks, err := server.New(server.Config{Logger: logger, Routes: []server.Route{
		server.HookRoute("/v1/nodes/sync", decorator(NodeHealth(&recorder.Sink{}))),
		server.HookRoute("/v1/pods/sync", WorkspacePods(&recorder.Sink{})),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hooks.Handler())
	defer srv.Close()

	cases := map[string]struct {
		reason string
		path   string
		body   string
	}{
		"NodeWithoutName":   {reason: "An empty object is no Node to report.", path: "/v1/nodes/sync", body: `{"object":{}}`},
		"NodeNotAnObject":   {reason: "An array is no Node.", path: "/v1/nodes/sync", body: `{"object":[]}`},
		"NodeBadMetadata":   {reason: "Wrongly typed metadata does not decode.", path: "/v1/nodes/sync", body: `{"object":{"metadata":"nope"}}`},
		"NodeNoObject":      {reason: "No object at all.", path: "/v1/nodes/sync", body: `{}`},
		"PodNotAnObject":    {reason: "A string is no Pod.", path: "/v1/pods/sync", body: `{"object":"pod"}`},
		"PodBadLabels":      {reason: "Wrongly typed labels do not decode.", path: "/v1/pods/sync", body: `{"object":{"metadata":{"labels":[1]}}}`},
		"PodNullObject":     {reason: "A null object is no object.", path: "/v1/pods/sync", body: `{"object":null}`},
		"NodeBadAttachment": {reason: "Attachments that are not objects do not decode.", path: "/v1/nodes/sync", body: `{"object":{"metadata":{"name":"n"}},"attachments":{"A.v1":[]}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if diff := cmp.Diff(http.StatusBadRequest, resp.StatusCode); diff != "" {
				t.Errorf("%s\ncode: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("malformed requests were logged as errors:\n%s", logs.String())
	}
}
