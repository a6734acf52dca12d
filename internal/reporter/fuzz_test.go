package reporter

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzObservations posts arbitrary bodies to the sidecar's localhost API:
// whatever the bytes, it answers 204, 400 or 413 and never panics.
//
//	go test ./internal/reporter -run '^$' -fuzz FuzzObservations -fuzztime 60s
func FuzzObservations(f *testing.F) {
	f.Add([]byte(`{"observations":[{"workspace":{"namespace":"team-a","name":"shop","phase":"Ready","replicas":2,"readyReplicas":2,"updatedReplicas":2}}]}`))
	f.Add([]byte(`{"observations":[{"workspaceDeleted":{"namespace":"team-a","name":"shop"}}]}`))
	f.Add([]byte(`{"observations":[{"node":{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}}]}`))
	f.Add([]byte(`{"observations":[{"pod":{"namespace":"a","name":"p","workspace":"w","nodeName":"n1","phase":"Running"}}]}`))
	f.Add([]byte(`{"observations":[{"workspace":{"namespace":"a","name":"b"},"node":{"metadata":{"name":"n"}}}]}`))
	f.Add([]byte(`{"observations":[{"claim":{"namespace":"a","name":"c","workspace":"w","granted":false,"reason":"SignatureInvalid","since":"2026-03-01T12:00:00Z"}}]}`))
	f.Add([]byte(`{"observations":[{"workspace":{"namespace":"a","name":"b","phase":"Idle","idle":true,"terminating":true,"wantedArtifactHash":"h","class":{"name":"c","maxWorkspaces":3}}}]}`))
	f.Add([]byte(`{"observations":[{}]}`))
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.MaxWorkspaces, cfg.MaxNodes, cfg.MaxPods = 4, 4, 4
	r, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	h := r.LocalHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/observations", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
	})
}
