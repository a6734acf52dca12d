package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWorkspaceSync posts Workspace sync fixtures through the real
// router and handler, as the server serves them, without the network.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench WorkspaceSync -benchmem
func BenchmarkWorkspaceSync(b *testing.B) {
	h := fixtureHandler(b)
	for _, name := range []string{"first-sync", "steady-ready", "auto-scaling-hpa-scaled", "credentials-mixed"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", name, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if rec := post(h, "/v1/workspace/sync", body, nil); rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}

// BenchmarkPodsSync posts the workspace-pods fixture, the hook Metacontroller
// calls most in a steady fleet, through the real router and handler.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench PodsSync -benchmem
func BenchmarkPodsSync(b *testing.B) {
	h := fixtureHandler(b)
	body, err := os.ReadFile(filepath.Join(fixturesDir, "pods", "sync", "running-pod", "request.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if rec := post(h, "/v1/pods/sync", body, nil); rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
