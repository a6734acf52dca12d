package state

import (
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestWorkspaceCoalescing checks change detection, latest-wins and what a
// send acknowledges.
func TestWorkspaceCoalescing(t *testing.T) {
	st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	ready := &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", Replicas: 1, ReadyReplicas: 1}
	if ok, _ := st.ObserveWorkspace(ready, t0); !ok {
		t.Fatal("first observation did not queue a report")
	}
	if ok, _ := st.ObserveWorkspace(ready, t0.Add(time.Second)); ok {
		t.Error("an unchanged status queued a report")
	}
	p, _ := st.Next()
	// A change while the first report is in flight must survive its ack.
	st.ObserveWorkspace(wsStatus("shop", "Degraded", ""), t0.Add(2*time.Second))
	st.Done(p, true, t0)
	if got := st.Counts().Pending; got != 1 {
		t.Fatalf("pending after acking an outdated report: got %d, want 1", got)
	}
	p2, ok := st.Next()
	if !ok || string(p2.Body) == string(p.Body) {
		t.Fatalf("next report: ok=%v, same body as the first=%v", ok, string(p2.Body) == string(p.Body))
	}
	st.Done(p2, true, t0)
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "shop"}, t0.Add(3*time.Second))
	p3, _ := st.Next()
	// A failed send keeps the Tombstone, with the same bytes for the retry.
	st.Requeue(p3)
	if got := st.Counts().Tombstones; got != 1 {
		t.Fatalf("tombstones after a failed send: got %d, want 1", got)
	}
	p4, _ := st.Next()
	if string(p4.Body) != string(p3.Body) {
		t.Errorf("a retried deletion changed its bytes, and so its Idempotency-Key")
	}
	st.Done(p4, true, t0)
	if diff := cmp.Diff(Counts{}, st.Counts()); diff != "" {
		t.Errorf("a delivered deletion should forget the workspace (-want, +got):\n%s", diff)
	}
}

// TestAutoScalesEachReported checks that a wake and the idle that follows
// it before Cluster Control takes either are both reported, in order, one
// report each, and that a failed send keeps the one it carried.
func TestAutoScalesEachReported(t *testing.T) {
	st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	k := types.NamespacedName{Namespace: "ns", Name: "shop"}
	st.ObserveWorkspace(&observation.WorkspaceStatus{Namespace: k.Namespace, Name: k.Name, Phase: "Idle", Idle: true}, t0)
	p, _ := st.Next()
	st.Done(p, true, t0)
	wake := ccapi.AutoScale{Action: ccapi.AutoScaleWake, Reason: ccapi.ReasonRequest, At: ccapi.Stamp(t0.Add(time.Second))}
	idle := ccapi.AutoScale{Action: ccapi.AutoScaleIdle, Reason: ccapi.ReasonInactivity, At: ccapi.Stamp(t0.Add(9 * time.Second))}
	st.AutoScaled(k, wake, t0.Add(time.Second))
	st.AutoScaled(k, idle, t0.Add(9*time.Second))

	var got []string
	for i := 0; i < 5; i++ {
		p, ok := st.Next()
		if !ok {
			break
		}
		if p.autoScale == nil {
			got = append(got, "none")
		} else {
			got = append(got, p.autoScale.Action)
		}
		if i == 0 {
			// The first send fails: the wake goes again.
			st.Requeue(p)
			continue
		}
		st.Done(p, true, t0.Add(10*time.Second))
	}
	if diff := cmp.Diff([]string{"wake", "wake", "idle"}, got); diff != "" {
		t.Errorf("reports, by the autoScale each carried: -want, +got:\n%s", diff)
	}
}
