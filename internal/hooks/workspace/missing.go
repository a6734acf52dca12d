package workspace

import (
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// This file tells a child whose create failed from one not created yet.
//
// Metacontroller applies every child a sync asks for in the pass of that
// sync, before it writes the status the sync answered, and the next sync
// sees the children its informers hold. So a child a sync asked for and
// the syncs after it still do not see, past a short grace for the
// informers, was not created: an object of that kind and name is in the
// way (one another controller owns is never taken: the apply would give it
// a second controller, which the API refuses; one nobody owns is adopted
// only if it carries the label of Metacontroller's generated selector, and
// the install's admission policy, deploy/hooks/children-admission-policy.yaml,
// refuses the apply that would overwrite and adopt it), or a ResourceQuota
// or an admission webhook or policy refused it. The workspace is then Degraded, ChildNotCreated, naming the
// child; the reporter's Warning Event carries that message.
//
// The hook cannot look at the object in the way. Metacontroller would show
// it only as a related object, and it maps each change of an object of a
// related kind to its parents by going through every parent of the
// controller (it keeps no index from a related object to its parents):
// relating Deployments, Services or ConfigMaps would make every write of
// one, anywhere in the cluster, cost a pass over every Workspace. Who owns
// the object is told by kubectl formspec diff and takeover prepare, which
// read it with the user's credentials.

// missingChildren are the workspace's own Deployment, Service and
// ConfigMap that are not observed, for a sync that asks for them.
func missingChildren(o *observed) []childRef {
	var out []childRef
	if o.deployment == nil {
		out = append(out, childRef{"Deployment", o.ws.Name})
	}
	if !o.hasService {
		out = append(out, childRef{"Service", o.ws.Name})
	}
	if o.children.ConfigMaps[metacontroller.Name(o.ws.Namespace, configMapName(o.ws.Name))] == nil {
		out = append(out, childRef{"ConfigMap", configMapName(o.ws.Name)})
	}
	return out
}

// absence is the judgement of the missing children of a sync that asks
// for them.
type absence struct {
	// missing are the children not observed.
	missing []childRef
	// problem is set once they have been missing past the grace.
	problem *problem
	// resync, in seconds, is when the grace ends, while it runs.
	resync float64
}

// judgeMissing judges the children missing from a sync that asks for
// them, from the status the workspace already has: the grace starts when
// a sync first saw a child missing, which its Progressing condition says
// (True, Creating, since its lastTransitionTime), and not before Degraded
// last turned False: a workspace whose spec or class was wrong had its
// children kept as they were, so nothing was asked for until then. Before
// a sync has answered Creating, no pass has tried to create them.
func (h *Hooks) judgeMissing(o *observed) *absence {
	a := &absence{missing: missingChildren(o)}
	if len(a.missing) == 0 {
		return a
	}
	conds := o.ws.Status.Conditions
	progressing := meta.FindStatusCondition(conds, v1alpha1.ConditionProgressing)
	if progressing == nil || progressing.Status != metav1.ConditionTrue || progressing.Reason != v1alpha1.ReasonCreating {
		return a
	}
	since := progressing.LastTransitionTime.Time
	if d := meta.FindStatusCondition(conds, v1alpha1.ConditionDegraded); d != nil {
		switch {
		case d.Status == metav1.ConditionFalse && d.LastTransitionTime.After(since):
			since = d.LastTransitionTime.Time
		case d.Status == metav1.ConditionTrue && (d.Reason == v1alpha1.ReasonClusterClassNotFound || d.Reason == v1alpha1.ReasonInvalidSpec):
			// The last sync kept the children as they were: it asked
			// for nothing new.
			return a
		}
	}
	if left := since.Add(h.cfg.ChildCreateGrace).Sub(h.cfg.Now()); left > 0 {
		a.resync = math.Ceil(left.Seconds())
		return a
	}
	a.problem = notCreated(o.ws, a.missing, h.cfg.ChildCreateGrace)
	return a
}

// notCreated is the Degraded problem of children missing past the grace.
// The message names each, the likely causes, and how to see the first
// one's owner; it has no clock reading, so that a repeated request gives
// the same bytes.
func notCreated(ws *v1alpha1.Workspace, missing []childRef, grace time.Duration) *problem {
	names := make([]string, len(missing))
	for i, r := range missing {
		names[i] = fmt.Sprintf("%s %s/%s", r.kind, ws.Namespace, r.name)
	}
	first := missing[0]
	return &problem{reason: v1alpha1.ReasonChildNotCreated, message: fmt.Sprintf(
		"%s not created %s after it was asked for: an object of that kind and name that the workspace does not own (made by hand, or owned by another controller) is in the way, "+
			"or a ResourceQuota or an admission webhook or policy refused it (Metacontroller's log and the namespace's events say which); "+
			"`kubectl get %s %s -n %s -o jsonpath='{.metadata.ownerReferences}'` shows an object's owner, and `kubectl formspec diff -n %s %s` names it",
		strings.Join(names, ", "), grace, strings.ToLower(first.kind), first.name, ws.Namespace, ws.Namespace, ws.Name)}
}
