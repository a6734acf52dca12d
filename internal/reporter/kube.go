package reporter

import (
	"context"
	"encoding/json"
	"fmt"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// workspacesResource is what directives are written onto.
var workspacesResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "workspaces"}

// FieldManager names the reporter's writes in managedFields.
const FieldManager = "formspec-reporter"

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
		r.events.write(evs)
	}
	for _, d := range plan.Write {
		err := r.patchWorkspace(ctx, d)
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
			if ok, held := r.limiter.allow(logKeyDirectives, r.cfg.now()); ok {
				r.log.Warn("cannot write directive onto workspace", "namespace", d.Namespace, "name", d.Name,
					"action", d.Action, "suppressed", held, "err", err)
			}
		}
	}
}

// directivePatch is the JSON merge patch that writes d: one annotation.
func directivePatch(d ccapi.Directive) ([]byte, error) {
	var annotations map[string]any
	switch d.Action {
	case ccapi.ActionRestartRequired:
		annotations = map[string]any{v1alpha1.AnnotationArtifactBinaryHash: d.ArtifactHash}
	case ccapi.ActionIdle:
		annotations = map[string]any{v1alpha1.AnnotationIdle: "true"}
	case ccapi.ActionWake:
		annotations = map[string]any{v1alpha1.AnnotationIdle: nil}
	default:
		return nil, fmt.Errorf("unknown action %q", d.Action)
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
}

func (r *Reporter) patchWorkspace(ctx context.Context, d ccapi.Directive) error {
	patch, err := directivePatch(d)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	_, err = r.cfg.Kube.Dynamic.Resource(workspacesResource).Namespace(d.Namespace).
		Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("cannot patch workspace %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}
