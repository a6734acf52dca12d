package reporter

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
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	st.observeWorkspace(wsStatus("shop", "Ready", ""), t0)
	st.observeWorkspace(wsStatus("blog", "Ready", ""), t0)
	for range 2 {
		p, _ := st.next()
		st.finish(p, sent, t0)
	}
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "blog"}, t0.Add(time.Minute))
	if got := st.resync(t0.Add(10 * time.Minute)); got != 1 {
		t.Fatalf("resync queued %d reports, want 1 (the deleted workspace has its tombstone pending)", got)
	}
	var got []ccapi.WorkspaceStatusReport
	for {
		p, ok := st.next()
		if !ok {
			break
		}
		var rep ccapi.WorkspaceStatusReport
		if err := json.Unmarshal(p.body, &rep); err != nil {
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
	st := newState(limits{workspaces: 10, tombstones: 10, nodeStale: time.Hour, podStale: time.Hour, claimStale: time.Hour}, func(string) {})
	std := &observation.ClassInfo{Name: "standard", MaxWorkspaces: 40}
	for _, n := range []string{"a", "b", "c"} {
		st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: n, Phase: "Ready", ClusterClass: "standard", Class: std}, t0)
	}
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "d", Phase: "Ready", ClusterClass: "gpu",
		Class: &observation.ClassInfo{Name: "gpu"}}, t0)
	st.observeWorkspace(&observation.WorkspaceStatus{Namespace: "ns", Name: "e", Phase: "Degraded", ClusterClass: "missing"}, t0)
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "c"}, t0)
	want := []ccapi.ClassUsage{{Name: "gpu", WorkspaceCount: 1}, {Name: "standard", MaxWorkspaces: 40, WorkspaceCount: 2}}
	if diff := cmp.Diff(want, st.nodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage (-want, +got):\n%s", diff)
	}
	st.deleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "d"}, t0)
	want = want[1:]
	if diff := cmp.Diff(want, st.nodeReport("r", t0).ClusterClasses); diff != "" {
		t.Errorf("class usage after its last workspace went (-want, +got):\n%s", diff)
	}
}
