package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// FuzzSync feeds arbitrary request bodies to the Workspace hooks the way the
// server does: whatever the bytes, a hook returns an answer or an error,
// never panics, and an answer always encodes.
//
//	go test ./internal/hooks/workspace -run '^$' -fuzz FuzzSync -fuzztime 60s
func FuzzSync(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "..", "fixtures", "workspace", "*", "*", "request.json"))
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"parent":{"metadata":{"name":"a"},"spec":{"clusterClass":"c","datastores":[{"name":"x"},{"name":"x"}]}},"related":{"ClusterClass.formspec.dev/v1alpha1":{"c":{"spec":{"scaling":{"minReplicas":-5,"maxReplicas":-1}}}}}}`))
	// Over a per-kind cap: Validate refuses it before any hook runs.
	f.Add([]byte(`{"parent":{"metadata":{"name":"a"}},"children":{"Service.v1":{"n/1":{},"n/2":{},"n/3":{},"n/4":{},"n/5":{},"n/6":{},"n/7":{},"n/8":{},"n/9":{}}}}`))
	h := New(Config{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var req Request
		if req.Decode(body) != nil || req.Validate() != nil {
			return
		}
		var parent metacontroller.CustomizeRequest
		if json.Unmarshal(body, &parent) != nil {
			return
		}
		ctx := context.Background()
		for _, hook := range []func(context.Context, *Request) (*metacontroller.CompositeResponse, error){h.Sync, h.Finalize} {
			resp, err := hook(ctx, &req)
			if err != nil {
				continue
			}
			if _, err := json.Marshal(resp); err != nil {
				t.Fatalf("response does not encode: %v", err)
			}
		}
		if resp, err := h.Customize(ctx, &parent); err == nil {
			if _, err := json.Marshal(resp); err != nil {
				t.Fatalf("customize response does not encode: %v", err)
			}
		}
	})
}
