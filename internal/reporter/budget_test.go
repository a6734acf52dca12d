package reporter

import (
	"context"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDeferredDirectivesAnnounced runs the reporter against a fake
// cluster with a budget of one restart at once: the first restart is
// written, and each of the others becomes a RestartDeferred Event on its
// Workspace that says why, is counted once in the deferred counter and
// shows in the waiting gauge, poll after poll, without a patch.
func TestDeferredDirectivesAnnounced(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	fc := newFakeCluster(t, "team-a/ws-00", "team-a/ws-01", "team-a/ws-02")
	patches := fc.recordPatches()
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	cfg.RestartBudget = Budget{Share: 0.1, MinInterval: time.Hour}
	r := newReporter(t, cfg)
	for i := range 3 {
		mustObserve(t, r, wsObs("team-a", wsName(i), "Ready", 2, digest(0)))
		cc.SetDirective("team-a", wsName(i), digest(1))
	}
	runLoops(t, func(ctx context.Context) { _ = r.Run(ctx) })

	deferred := func() float64 {
		return testutil.ToFloat64(r.m.directivesDeferred.WithLabelValues(ccapi.ActionRestartRequired, state.WaitBudget))
	}
	testsync.WaitFor(t, "two restarts deferred and announced", func() bool {
		n := 0
		for _, ev := range fc.eventList(t) {
			if ev.Reason == "RestartDeferred" {
				n++
			}
		}
		return deferred() == 2 && n == 2
	})
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls", func() bool { return len(cc.Requests()) > polls+3 })
	if got := deferred(); got != 2 {
		t.Errorf("deferred{restart_required,budget} = %v after more polls, want 2: each wait is counted once", got)
	}
	const waiting = `# HELP formspec_reporter_directives_waiting Directives from Cluster Control waiting for their budget now, by action; 0 on a reporter that does not write directives.
# TYPE formspec_reporter_directives_waiting gauge
formspec_reporter_directives_waiting{action="idle"} 0
formspec_reporter_directives_waiting{action="restart_required"} 2
`
	if err := testutil.GatherAndCompare(r.Registry(), strings.NewReader(waiting), "formspec_reporter_directives_waiting"); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff([]string{"team-a/ws-00"}, patches.patched()); diff != "" {
		t.Errorf("patched (-want, +got):\n%s", diff)
	}
	for _, ev := range fc.eventList(t) {
		if ev.Reason != "RestartDeferred" {
			continue
		}
		if ev.Regarding.Kind != "Workspace" || (ev.Regarding.Name != "ws-01" && ev.Regarding.Name != "ws-02") ||
			!strings.Contains(ev.Note, "budget allows 1 at once") || !strings.Contains(ev.Note, "--restart-budget-share") {
			t.Errorf("RestartDeferred Event: regarding %v, note %q", ev.Regarding, ev.Note)
		}
	}
}
