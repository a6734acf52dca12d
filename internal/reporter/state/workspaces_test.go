package state

import (
	"encoding/json"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
)

// TestResync checks the periodic re-report: every live workspace with
// nothing pending is queued again, with the time it was observed (so it
// never passes for newer than another reporter's view) and a new
// reportedAt (so Cluster Control applies it again).
func TestResync(t *testing.T) {
	st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	st.ObserveWorkspace(wsStatus("shop", "Ready", ""), t0)
	st.ObserveWorkspace(wsStatus("blog", "Ready", ""), t0)
	for range 2 {
		p, _ := st.Next()
		st.Done(p, true, t0)
	}
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "blog"}, t0.Add(time.Minute))
	if got := st.Resync(t0.Add(10 * time.Minute)); got != 1 {
		t.Fatalf("resync queued %d reports, want 1 (the deleted workspace has its Tombstone pending)", got)
	}
	var got []ccapi.WorkspaceStatusReport
	for {
		p, ok := st.Next()
		if !ok {
			break
		}
		var rep ccapi.WorkspaceStatusReport
		if err := json.Unmarshal(p.Body, &rep); err != nil {
			t.Fatal(err)
		}
		rep.Status = nil
		got = append(got, rep)
	}
	want := []ccapi.WorkspaceStatusReport{
		{Namespace: "ns", Name: "blog", ObservedAt: t0.Add(time.Minute), ReportedAt: t0.Add(time.Minute), Deleted: true},
		{Namespace: "ns", Name: "shop", ObservedAt: t0, ReportedAt: t0.Add(10 * time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports after resync (-want, +got):\n%s", diff)
	}
}

// TestClassUsage checks the ClusterClass report: each class's limit with
// the live workspaces using it.
func TestClassUsage(t *testing.T) {
	st := New(Limits{Workspaces: 10, Tombstones: 10, NodeStale: time.Hour, PodStale: time.Hour, ClaimStale: time.Hour}, func(string) {})
	std := &observation.ClassInfo{Name: "standard", MaxWorkspaces: 40}
	for _, n := range []string{"a", "b", "c"} {
		st.ObserveWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: n, Phase: "Ready", ClusterClass: "standard", Class: std}, t0)
	}
	st.ObserveWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "d", Phase: "Ready", ClusterClass: "gpu",
		Class: &observation.ClassInfo{Name: "gpu"}}, t0)
	st.ObserveWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "e", Phase: "Degraded", ClusterClass: "missing"}, t0)
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "c"}, t0)
	want := []ccapi.ClassUsage{{Name: "gpu", WorkspaceCount: 1}, {Name: "standard", MaxWorkspaces: 40, WorkspaceCount: 2}}
	if diff := cmp.Diff(want, st.NodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage (-want, +got):\n%s", diff)
	}
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "d"}, t0)
	want = want[1:]
	if diff := cmp.Diff(want, st.NodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage after its last workspace went (-want, +got):\n%s", diff)
	}
}

// TestTwoReplicasLeaveClusterControlTheLatest plays the two hook-server
// replicas of an install, each with its reporter, and Cluster Control's
// merge (the newest observedAt wins per workspace). Successive syncs of one
// workspace go to either replica, and a hand-off can linger for up to a
// second, so what a reporter receives later is not always newer; and a
// replica whose sync brings the API back to a state its reporter reported
// before must report it again. Either way Cluster Control must end with the
// status the last sync wrote.
func TestTwoReplicasLeaveClusterControlTheLatest(t *testing.T) {
	a := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	b := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	held := map[string]ccapi.WorkspaceStatusReport{}
	deliver := func(st *State) {
		t.Helper()
		for {
			p, ok := st.Next()
			if !ok {
				return
			}
			var rep ccapi.WorkspaceStatusReport
			if err := json.Unmarshal(p.Body, &rep); err != nil {
				t.Fatal(err)
			}
			if cur, ok := held[rep.Name]; !ok || !rep.ObservedAt.Before(cur.ObservedAt) {
				held[rep.Name] = rep
			}
			st.Done(p, true, t0)
		}
	}
	// synced is a sync of the replica's hook at the given time.
	synced := func(phase string, at time.Duration, changed bool) *observation.WorkspaceStatus {
		o := wsStatus("shop", phase, "")
		o.ObservedAt, o.StatusChanged = t0.Add(at), changed
		return o
	}
	phase := func() string {
		rep, ok := held["shop"]
		if !ok || rep.Status == nil {
			return "none"
		}
		return rep.Status.Phase
	}

	// Replica A's sync sees Progressing; B's, 300 ms later, Ready. A's
	// hand-off lingers and reaches its reporter after B's report was sent.
	b.ObserveWorkspace(synced("Ready", 300*time.Millisecond, true), t0.Add(400*time.Millisecond))
	deliver(b)
	a.ObserveWorkspace(synced("Progressing", 0, true), t0.Add(time.Second))
	deliver(a)
	if got := phase(); got != "Ready" {
		t.Errorf("after a late hand-off of an older sync, Cluster Control holds %s, want Ready", got)
	}

	// The workspace rolls: B sees it Progressing, then A's sync sees it
	// Progressing too and B's Ready again. Then a roll that A alone serves:
	// Progressing on B, Ready on A, the state A's reporter last had.
	b.ObserveWorkspace(synced("Progressing", 10*time.Second, true), t0.Add(10*time.Second))
	deliver(b)
	a.ObserveWorkspace(synced("Progressing", 11*time.Second, false), t0.Add(11*time.Second))
	deliver(a)
	b.ObserveWorkspace(synced("Ready", 12*time.Second, true), t0.Add(12*time.Second))
	deliver(b)
	a.ObserveWorkspace(synced("Ready", 20*time.Second, false), t0.Add(20*time.Second))
	deliver(a)
	if got := phase(); got != "Ready" {
		t.Fatalf("after B's Ready, Cluster Control holds %s, want Ready", got)
	}
	b.ObserveWorkspace(synced("Progressing", 30*time.Second, true), t0.Add(30*time.Second))
	deliver(b)
	if pending, _ := a.ObserveWorkspace(synced("Ready", 31*time.Second, true), t0.Add(31*time.Second)); !pending {
		t.Error("a sync that changed the API's status back to the reporter's last state queued no report")
	}
	deliver(a)
	if got := phase(); got != "Ready" {
		t.Errorf("after A's sync made it Ready again, Cluster Control holds %s, want Ready", got)
	}
	// A repeat of the same sync (the resync's) does not report again.
	if pending, _ := a.ObserveWorkspace(synced("Ready", 90*time.Second, false), t0.Add(90*time.Second)); pending {
		t.Error("a resync that changed nothing queued a report")
	}
}
