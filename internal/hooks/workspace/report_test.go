package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/recorder"
)

// TestSyncTellsTheReporterWhetherItChangesTheStatus checks what a sync
// hands the reporter besides the status: the hook's time, and whether the
// status differs from the one the Workspace carried. A sync whose parent
// already carries the status it computes (Metacontroller's next sync, a
// resync) changes nothing, so the reporter has nothing new to tell.
func TestSyncTellsTheReporterWhetherItChangesTheStatus(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", "auto-scaling-hpa-scaled", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	rec := &recorder.Sink{}
	h := New(Config{Reports: rec, Now: func() time.Time { return at }})
	sync := func(body []byte) (status any) {
		t.Helper()
		var req Request
		if err := req.Decode(body); err != nil {
			t.Fatal(err)
		}
		resp, err := h.Sync(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	// withStatus is body with the parent's status replaced by status, as
	// Metacontroller writes it.
	withStatus := func(status any, change func(map[string]any)) []byte {
		t.Helper()
		var req, st map[string]any
		raw, err := json.Marshal(status)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		change(st)
		req["parent"].(map[string]any)["status"] = st
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	type told struct {
		ObservedAt    time.Time
		StatusChanged bool
	}
	var got []told
	status := sync(withStatus(map[string]any{}, func(map[string]any) {}))
	sync(withStatus(status, func(map[string]any) {}))
	sync(withStatus(status, func(st map[string]any) { st["phase"] = "Progressing" }))
	for _, obs := range rec.Sent {
		if obs.Workspace == nil {
			t.Fatalf("a sync sent %+v, want a workspace status", obs)
		}
		got = append(got, told{obs.Workspace.ObservedAt, obs.Workspace.StatusChanged})
	}
	want := []told{{at, true}, {at, false}, {at, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first sync, the same status again, a status the sync changes back (-want, +got):\n%s", diff)
	}
}
