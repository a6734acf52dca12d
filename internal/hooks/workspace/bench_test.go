package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSync measures one sync, decoding and encoding included as the
// server does them: a first sync, a running auto-scaling workspace (five
// observed children), and one with three datastore claims.
//
//	go test ./internal/hooks/workspace -run '^$' -bench Sync -benchmem -count 10 | benchstat -
func BenchmarkSync(b *testing.B) {
	for _, name := range []string{"first-sync", "auto-scaling-hpa-scaled", "credentials-mixed"} {
		body, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", name, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		h := New(Config{})
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var req Request
				if err := req.Decode(body); err != nil {
					b.Fatal(err)
				}
				resp, err := h.Sync(context.Background(), &req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
