package reporter

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName names the Lease by which the reporters of an install's
// replicas elect the one that writes directives.
//
// Any replica answers any hook, and every reporter reports what its own
// hook server saw, but the directive budget (budget.go) is a promise about
// the whole install: at most a share of the workspaces restarting at once,
// one restart of a workspace per interval. Two reporters each keeping it
// would keep it twice over whenever they decide at once. So one of them,
// elected through this Lease in their namespace, writes directives and
// keeps the budget; the others still fetch directives, report them
// consumed and watch the Workspaces (watch.go), so that the one elected
// next knows what every Workspace is doing.
const LeaseName = "formspec-reporter"

// elects reports whether this reporter campaigns for the Lease: it has a
// client for Leases and a namespace to hold one in. Without, it writes
// directives as if it were alone, if it can write at all (New sets
// r.writer).
func (cfg Config) elects() bool {
	return cfg.Kube != nil && cfg.Kube.Dynamic != nil && cfg.Kube.Leases != nil && cfg.LeaseNamespace != ""
}

// runElection campaigns for the Lease until ctx ends, and keeps r.writer
// true while this reporter holds it.
func (r *Reporter) runElection(ctx context.Context) {
	if !r.cfg.elects() {
		return
	}
	k := r.cfg.Kube
	// A restarted container is a new candidate: it holds none of the
	// state its previous run had, and must not take the Lease back as if
	// it did.
	id := r.cfg.Reporter + "_" + string(uuid.NewUUID())
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: r.cfg.LeaseNamespace, Name: LeaseName},
			Client:     k.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   r.cfg.LeaseDuration,
		RenewDeadline:   r.cfg.LeaseRenewDeadline,
		RetryPeriod:     r.cfg.LeaseRetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				// Run cancels ctx before it calls OnStoppedLeading; this
				// runs in a goroutine of its own, possibly after both.
				if ctx.Err() == nil {
					r.writer.Store(true)
					r.log.Info("writing directives: this reporter holds the Lease", "lease", r.cfg.LeaseNamespace+"/"+LeaseName, "identity", id)
				}
				<-ctx.Done()
				r.writer.Store(false)
			},
			OnStoppedLeading: func() {
				if r.writer.Swap(false) {
					r.log.Info("no longer writing directives: the Lease is lost", "lease", r.cfg.LeaseNamespace+"/"+LeaseName)
				}
				r.st.StopWaiting()
			},
		},
	})
	if err != nil {
		// Only a Config that validate let through with bad durations.
		r.log.Error("cannot campaign for the directive Lease; writing no directives", "err", err)
		return
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
}

// validateLease checks the Lease's durations as client-go will.
func (cfg Config) validateLease() error {
	if cfg.LeaseDuration <= cfg.LeaseRenewDeadline || float64(cfg.LeaseRenewDeadline) <= leaderelection.JitterFactor*float64(cfg.LeaseRetryPeriod) {
		return fmt.Errorf("lease durations %v, %v, %v: want the lease longer than the renew deadline, and that longer than %v retry periods",
			cfg.LeaseDuration, cfg.LeaseRenewDeadline, cfg.LeaseRetryPeriod, leaderelection.JitterFactor)
	}
	return nil
}
