package reporter

import (
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
)

// TestWorkspaceCoalescing checks change detection, latest-wins and what a
// send acknowledges.
func TestWorkspaceCoalescing(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	ready := &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", Replicas: 1, ReadyReplicas: 1}
	if ok, _ := st.observeWorkspace(ready, t0); !ok {
		t.Fatal("first observation did not queue a report")
	}
	if ok, _ := st.observeWorkspace(ready, t0.Add(time.Second)); ok {
		t.Error("an unchanged status queued a report")
	}
	p, _ := st.next()
	// A change while the first report is in flight must survive its ack.
	st.observeWorkspace(wsStatus("shop", "Degraded", ""), t0.Add(2*time.Second))
	st.finish(p, sent)
	if got := st.counts().Pending; got != 1 {
		t.Fatalf("pending after acking an outdated report: got %d, want 1", got)
	}
	p2, ok := st.next()
	if !ok || p2.key == p.key {
		t.Fatalf("next report: ok=%v, same key as the first=%v", ok, p2.key == p.key)
	}
	st.finish(p2, sent)
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "shop"}, t0.Add(3*time.Second))
	p3, _ := st.next()
	// A failed send keeps the tombstone, with the same bytes for the retry.
	st.finish(p3, retry)
	if got := st.counts().Tombstones; got != 1 {
		t.Fatalf("tombstones after a failed send: got %d, want 1", got)
	}
	p4, _ := st.next()
	if p4.key != p3.key {
		t.Errorf("a retried deletion changed its Idempotency-Key")
	}
	st.finish(p4, sent)
	if diff := cmp.Diff(counts{}, st.counts()); diff != "" {
		t.Errorf("a delivered deletion should forget the workspace (-want, +got):\n%s", diff)
	}
}
