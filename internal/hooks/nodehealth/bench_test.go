package nodehealth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/codec"
)

// BenchmarkWorkspacePods decodes the workspace-pods fixture's request and
// runs the hook on it, as the server does for the hook it calls most.
func BenchmarkWorkspacePods(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "pods", "sync", "running-pod", "request.json"))
	if err != nil {
		b.Fatal(err)
	}
	h := WorkspacePods(observation.Discard)
	b.ReportAllocs()
	for b.Loop() {
		var req PodsRequest
		if err := codec.Unmarshal(raw, &req); err != nil {
			b.Fatal(err)
		}
		if _, err := h(b.Context(), &req); err != nil {
			b.Fatal(err)
		}
	}
}
