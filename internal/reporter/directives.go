package reporter

import (
	"context"
	"fmt"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"

	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// writeDirectives writes the directives that are not on their Workspace
// yet and are within their budget, counts and logs (rate-limited) those
// it refuses, and counts and announces those that begin to wait. Only the
// reporter elected to write directives writes (lease.go). The patch sets
// (or removes) one annotation and nothing else, so it is idempotent: a
// reporter that writes again after a failover writes the same value, and
// the API server records no change for a repeat.
func (r *Reporter) writeDirectives(ctx context.Context) {
	if !r.writer.Load() {
		return
	}
	plan := r.st.ToWrite(r.cfg.now())
	for _, ref := range plan.Refused {
		r.m.directivesRefused.WithLabelValues(ref.Reason).Inc()
		if ok, held := r.limiter.allow(logKeyDirectiveRefused, r.cfg.now()); ok {
			r.log.Warn("refusing directive", "namespace", ref.Directive.Namespace, "name", ref.Directive.Name,
				"action", ref.Directive.Action, "reason", ref.Reason, "suppressed", held)
		}
	}
	var evs []state.Event
	for _, w := range plan.Deferred {
		r.m.directivesDeferred.WithLabelValues(w.Directive.Action, w.Reason).Inc()
		evs = append(evs, w.Event)
	}
	if r.events != nil {
		r.events.Write(evs)
	}
	for _, d := range plan.Write {
		err := r.writeDirective(ctx, d)
		switch {
		case err == nil:
			r.m.directiveWrites.WithLabelValues("ok").Inc()
			r.st.Written(d, true, r.cfg.now())
		case apierrors.IsNotFound(err):
			// Not (or no longer) in the cluster: nothing to write, and
			// asking again will not change that.
			r.m.directiveWrites.WithLabelValues("not_found").Inc()
			r.st.Written(d, false, r.cfg.now())
		default:
			if ctx.Err() != nil {
				return
			}
			// Retried on the next poll.
			r.m.directiveWrites.WithLabelValues("error").Inc()
			r.warn(logKeyDirectives, "cannot write directive onto workspace", err, "namespace", d.Namespace, "name", d.Name, "action", d.Action)
		}
	}
}

// writeDirective patches d's annotation onto its Workspace.
func (r *Reporter) writeDirective(ctx context.Context, d ccapi.Directive) error {
	patch, err := kube.DirectivePatch(d)
	if err != nil {
		return err
	}
	if err := r.patch(ctx, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}, types.MergePatchType, patch); err != nil {
		return fmt.Errorf("cannot patch workspace %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// patch patches one Workspace (kube.Patch), within RequestTimeout.
func (r *Reporter) patch(ctx context.Context, k types.NamespacedName, pt types.PatchType, patch []byte) error {
	var dyn dynamic.Interface
	if r.cfg.Kube != nil {
		dyn = r.cfg.Kube.Dynamic
	}
	return kube.Patch(ctx, dyn, r.cfg.RequestTimeout, k, pt, patch)
}
