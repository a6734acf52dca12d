package reporter

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"
)

// TestOneReporterWritesDirectives runs the reporters of two replicas with
// a Lease between them: one writes every directive, once, the other none,
// so that the budget is kept once for the install; when the writer stops,
// the other takes the Lease over and writes the next.
func TestOneReporterWritesDirectives(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	leases := fake.NewClientset()
	type replica struct {
		r       *Reporter
		stop    context.CancelFunc
		done    chan struct{}
		patches *patchLog
	}
	var reps []*replica
	for i := range 2 {
		// Each replica's own view of the Workspaces, so that the writes
		// tell who wrote; the Lease is shared.
		fc := newFakeCluster(t, "team-a/shop")
		rep := &replica{done: make(chan struct{}), patches: fc.recordPatches()}
		cfg := fastConfig(url)
		cfg.Reporter = fmt.Sprintf("reporter-%d", i)
		cfg.Kube = fc.clients()
		cfg.Kube.Leases = leases.CoordinationV1()
		cfg.LeaseNamespace = "formspec-system"
		cfg.LeaseDuration, cfg.LeaseRenewDeadline, cfg.LeaseRetryPeriod = time.Second, 500*time.Millisecond, 50*time.Millisecond
		rep.r = newReporter(t, cfg)
		mustObserve(t, rep.r, wsObs("team-a", "shop", "Ready", 2, digest(0)))
		ctx, cancel := context.WithCancel(context.Background())
		rep.stop = cancel
		go func() {
			defer close(rep.done)
			var wg sync.WaitGroup
			wg.Go(func() { rep.r.runDeployStatus(ctx) })
			wg.Go(func() { rep.r.runElection(ctx) })
			wg.Wait()
		}()
		t.Cleanup(func() { cancel(); <-rep.done })
		reps = append(reps, rep)
	}
	writes := func(rep *replica, hash string) int {
		n := 0
		for _, w := range rep.patches.patches() {
			if strings.Contains(w, hash) {
				n++
			}
		}
		return n
	}
	testsync.WaitFor(t, "one reporter to hold the Lease", func() bool { return reps[0].r.writer.Load() != reps[1].r.writer.Load() })
	leader, other := reps[0], reps[1]
	if other.r.writer.Load() {
		leader, other = other, leader
	}
	for n := 1; n <= 3; n++ {
		cc.SetDirective("team-a", "shop", digest(n))
		testsync.WaitFor(t, "the writer to write "+digest(n), func() bool { return writes(leader, digest(n)) == 1 })
	}
	polls := len(cc.Requests())
	testsync.WaitFor(t, "more polls by both", func() bool { return len(cc.Requests()) > polls+6 })
	for n := 1; n <= 3; n++ {
		if got := writes(leader, digest(n)); got != 1 {
			t.Errorf("the writer wrote %s %d times, want once", digest(n), got)
		}
		if got := writes(other, digest(n)); got != 0 {
			t.Errorf("the reporter without the Lease wrote %s %d times, want never", digest(n), got)
		}
	}

	// The writer stops (its pod goes): it gives the Lease up, and the
	// other takes it and writes what comes next.
	leader.stop()
	<-leader.done
	if leader.r.writer.Load() {
		t.Errorf("a stopped reporter still counts itself the writer")
	}
	testsync.WaitFor(t, "the other reporter to take the Lease over", func() bool { return other.r.writer.Load() })
	cc.SetDirective("team-a", "shop", digest(4))
	testsync.WaitFor(t, "the new writer to write "+digest(4), func() bool { return writes(other, digest(4)) == 1 })
	if diff := cmp.Diff(0, writes(leader, digest(4))); diff != "" {
		t.Errorf("writes by the stopped reporter (-want, +got):\n%s", diff)
	}
}
