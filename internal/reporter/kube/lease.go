package kube

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName names the Lease by which the reporters of an install's
// replicas elect the one that writes directives.
//
// Any replica answers any hook, and every reporter reports what its own
// hook server saw, but the directive budget (package state) is a promise about
// the whole install: at most a share of the workspaces restarting at once,
// one restart of a workspace per interval. Two reporters each keeping it
// would keep it twice over whenever they decide at once. So one of them,
// elected through this Lease in their namespace, writes directives and
// keeps the budget; the others still fetch directives, report them
// consumed and watch the Workspaces (watch.go), so that the one elected
// next knows what every Workspace is doing.
const LeaseName = "formspec-reporter"

// Validate checks the Lease's durations as client-go will.
func (e Election) Validate() error {
	if e.Duration <= e.RenewDeadline || float64(e.RenewDeadline) <= leaderelection.JitterFactor*float64(e.RetryPeriod) {
		return fmt.Errorf("lease durations %v, %v, %v: want the lease longer than the renew deadline, and that longer than %v retry periods",
			e.Duration, e.RenewDeadline, e.RetryPeriod, leaderelection.JitterFactor)
	}
	return nil
}

// Election is a campaign for the Lease LeaseName in Namespace, timed as
// client-go's leaderelection does: how long a Lease not renewed holds, how
// long its holder tries to renew it before it stops, and how often a
// candidate tries.
type Election struct {
	Leases    typedcoordinationv1.LeasesGetter
	Namespace string
	// Candidate names this reporter; a fresh suffix is added to it for
	// each campaign.
	Candidate                            string
	Duration, RenewDeadline, RetryPeriod time.Duration
	Log                                  *slog.Logger
}

// Campaign campaigns for the Lease until ctx ends: lead is told true once
// this reporter holds it and false once it no longer does (and may be told
// false again); stopped is called each time a term ends.
func (e Election) Campaign(ctx context.Context, lead func(bool) (was bool), stopped func()) {
	// A restarted container is a new candidate: it holds none of the
	// state its previous run had, and must not take the Lease back as if
	// it did.
	id := e.Candidate + "_" + string(uuid.NewUUID())
	lease := e.Namespace + "/" + LeaseName
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: LeaseName},
			Client:     e.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   e.Duration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				// Run cancels ctx before it calls OnStoppedLeading; this
				// runs in a goroutine of its own, possibly after both.
				if ctx.Err() == nil {
					lead(true)
					e.Log.Info("writing directives: this reporter holds the Lease", "lease", lease, "identity", id)
				}
				<-ctx.Done()
				lead(false)
			},
			OnStoppedLeading: func() {
				if lead(false) {
					e.Log.Info("no longer writing directives: the Lease is lost", "lease", lease)
				}
				stopped()
			},
		},
	})
	if err != nil {
		// Only an Election that Validate let through with bad durations.
		e.Log.Error("cannot campaign for the directive Lease; writing no directives", "err", err)
		return
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
}
