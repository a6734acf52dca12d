package reporter

import (
	"context"
	"log/slog"

	"github.com/formspec/formspec-hooks/internal/reporter/kube"
)

// elects reports whether this reporter campaigns for the Lease: it has a
// client for Leases and a namespace to hold one in. Without, it writes
// directives as if it were alone, if it can write at all (New sets
// r.writer).
func (cfg Config) elects() bool {
	return cfg.Kube != nil && cfg.Kube.Dynamic != nil && cfg.Kube.Leases != nil && cfg.LeaseNamespace != ""
}

// Writing reports whether this reporter writes now: it holds the Lease,
// or there is none to hold. What else only the elected reporter writes
// (claims summaries) follows it.
func (r *Reporter) Writing() bool { return r.writer.Load() }

// runElection campaigns for the Lease until ctx ends, and keeps r.writer
// true while this reporter holds it.
func (r *Reporter) runElection(ctx context.Context) {
	if !r.cfg.elects() {
		return
	}
	r.cfg.election(r.log).Campaign(ctx, func(lead bool) bool {
		if lead {
			return r.writer.Swap(true)
		}
		return r.writer.Swap(false)
	}, r.st.StopWaiting)
}

// election is the campaign cfg configures.
func (cfg Config) election(log *slog.Logger) kube.Election {
	e := kube.Election{Namespace: cfg.LeaseNamespace, Candidate: cfg.Reporter, Log: log,
		Duration: cfg.LeaseDuration, RenewDeadline: cfg.LeaseRenewDeadline, RetryPeriod: cfg.LeaseRetryPeriod}
	if cfg.Kube != nil {
		e.Leases = cfg.Kube.Leases
	}
	return e
}

// LeaseName names the Lease by which the reporters of an install's
// replicas elect the one that writes directives (kube.LeaseName).
const LeaseName = kube.LeaseName
