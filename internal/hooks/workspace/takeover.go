package workspace

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// This file takes over the children of the original FormSpec operator
// (docs/migrating.md). `kubectl formspec takeover prepare` has labelled
// them for Metacontroller's generated selector and handed their fields to
// Metacontroller's field manager, so they arrive here as observed
// children; they are told apart by the label every child the hooks render
// carries (v1alpha1.LabelManagedBy), which theirs lack.
//
// The rules, each decided from what is observed, so that any replica
// decides the same at any sync:
//
//  1. While the Workspace carries formspec.dev/takeover: hold, or while a
//     datastore's credentials are not injected yet, every child is kept as
//     it is: the original pods keep running with the credentials the old
//     operator gave them, and the pods roll only once, onto a template
//     that already has the new credentials.
//  2. Then the Deployment named after the workspace gets this version's
//     template in place, keeping its selector (immutable; every sync keeps
//     the observed selector, and the pods carry its labels): one rollout,
//     which the Deployment's rolling update keeps from ever leaving no
//     ready pod. An original Deployment of another name is kept beside the
//     new one until the new one has rolled out.
//  3. Until the new pods have all rolled out, the original Service stays
//     as it is, its ports too (a number where the hooks' pods name their
//     port, which the old pods do not), selecting what both old and new
//     pods carry (the kept selector's labels), or only the old pods beside
//     a Deployment of another name; then it becomes the hooks' Service,
//     on the new pods.
//  4. The original children the hooks have no use for (another name, a
//     kind the workspace no longer needs) are kept until then too, and
//     deleted by Metacontroller once the Service has switched.

// childRef names an observed child in the workspace's namespace.
type childRef struct{ kind, name string }

func (r childRef) String() string { return r.kind + " " + r.name }

// legacyChildren are the observed children the hooks did not make, in the
// order of the controller's child kinds, then by name.
func legacyChildren(c *Children) []childRef {
	var out []childRef
	add := func(kind string, keys []string, ours func(string) bool) {
		for _, k := range keys {
			if !ours(k) {
				_, name, _ := strings.Cut(k, "/")
				out = append(out, childRef{kind, name})
			}
		}
	}
	add("Deployment", observedKeys(c.Deployments), func(k string) bool { return c.Deployments[k].Metadata.Labels.ours() })
	add("Service", observedKeys(c.Services), func(k string) bool { return c.Services[k].Metadata.Labels.ours() })
	add("ConfigMap", observedKeys(c.ConfigMaps), func(k string) bool { return c.ConfigMaps[k].Metadata.Labels.ours() })
	add("HorizontalPodAutoscaler", observedKeys(c.HPAs), func(k string) bool { return c.HPAs[k].Metadata.Labels.ours() })
	add("PodDisruptionBudget", observedKeys(c.PDBs), func(k string) bool { return c.PDBs[k].Metadata.Labels.ours() })
	return out
}

// observedKeys are the keys of the children observed, sorted.
func observedKeys[T any](m map[string]*T) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != nil {
			out = append(out, k)
		}
	}
	return out
}

// takeover is where a workspace with children of the original operator
// stands; nil when it has none.
type takeover struct {
	// legacy are the original operator's children still observed.
	legacy []childRef
	// held says why every child is kept as observed (rule 1): the hold
	// annotation (reason TakeoverHeld) or credentials not injected yet
	// (the condition that says so already has its reason); empty when
	// the takeover goes on.
	held string
	// deploymentOurs: the workspace's Deployment has this version's
	// template (rule 2 is done, its rollout perhaps not).
	deploymentOurs bool
	// rolledOut: and every pod runs it.
	rolledOut bool
	// serviceOurs: the workspace's Service is this version's and selects
	// as every workspace's does, or there is none.
	serviceOurs bool
}

// Why a takeover holds.
const (
	heldByAnnotation  = "annotation"
	heldByCredentials = "credentials"
)

// takeoverOf sizes up the original operator's children, or returns nil
// when there are none.
func takeoverOf(o *observed, bindings []binding) *takeover {
	if len(o.legacy) == 0 {
		return nil
	}
	t := &takeover{legacy: o.legacy, serviceOurs: o.serviceOurs}
	if dep := o.deployment; dep != nil && dep.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedBy {
		t.deploymentOurs = true
		t.rolledOut = templateRolledOut(dep)
	}
	if !t.deploymentOurs {
		switch {
		case o.ws.Annotations[v1alpha1.AnnotationTakeover] == v1alpha1.TakeoverHold:
			t.held = heldByAnnotation
		case slices.ContainsFunc(bindings, func(b binding) bool { return !b.injected() }):
			t.held = heldByCredentials
		}
	}
	return t
}

// settle changes the children this version renders for a workspace whose
// takeover goes on (rules 3 and 4): the Service selects old and new pods
// until the new ones run, and the original children without a place
// among them stay until the Service has switched. carry are the labels
// both old and new pods have (deploymentSelector).
func (t *takeover) settle(o *observed, children []any, carry, ours map[string]string) ([]any, error) {
	if !t.rolledOut {
		// The original Deployment taken over in place: its selector's
		// labels are on the old pods and the new.
		inPlace := o.deployment != nil && len(carry) > 0 && !maps.Equal(carry, ours)
		for i, c := range children {
			svc, ok := c.(*corev1.Service)
			if !ok {
				continue
			}
			switch {
			case slices.Contains(t.legacy, childRef{"Service", o.ws.Name}):
				// The original Service stays as it is, ports and all (its
				// target port may be a number where the hooks' pods name
				// it, and the old pods have no such name), selecting what
				// old and new pods share; beside an original Deployment of
				// another name, the old pods alone, which serve until the
				// new ones have rolled out.
				kept, err := frozen(o, freeze{only: func(kind, name string) bool { return kind == "Service" && name == o.ws.Name }})
				if err != nil {
					return nil, err
				}
				if inPlace {
					selectOn(kept[0], carry)
				}
				children[i] = kept[0]
			case inPlace:
				keep := *svc
				keep.Spec.Selector = carry
				children[i] = &keep
			}
		}
	}
	if t.rolledOut && t.serviceOurs {
		return children, nil
	}
	rendered := map[childRef]bool{}
	for _, c := range children {
		if ref, ok := refOf(c); ok {
			rendered[ref] = true
		}
	}
	// What pods and their clients use waits; an autoscaler or disruption
	// budget the workspace no longer has goes at once, so that it does
	// not fight this version's replica count meanwhile.
	waits := func(kind string) bool { return kind == "Deployment" || kind == "Service" || kind == "ConfigMap" }
	extras, err := frozen(o, freeze{keepObservedReplicas: true, only: func(kind, name string) bool {
		ref := childRef{kind, name}
		return waits(kind) && slices.Contains(t.legacy, ref) && !rendered[ref]
	}})
	if err != nil {
		return nil, err
	}
	return append(children, extras...), nil
}

// selectOn sets the selector of a Service kept as observed.
func selectOn(svc any, selector map[string]string) {
	switch c := svc.(type) {
	case observedChild:
		if s, ok := c.obj.(*corev1.Service); ok {
			s.Spec.Selector = selector
		}
	case metacontroller.Object:
		if spec, ok := c["spec"].(map[string]any); ok {
			sel := make(map[string]any, len(selector))
			for k, v := range selector {
				sel[k] = v
			}
			spec["selector"] = sel
		}
	}
}

// refOf names a child of the answer.
func refOf(c any) (childRef, bool) {
	switch c := c.(type) {
	case observedChild:
		return refOf(c.obj)
	case metacontroller.Object:
		kind, _ := c["kind"].(string)
		meta, _ := c["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		return childRef{kind, name}, kind != "" && name != ""
	case *appsv1.Deployment:
		return childRef{"Deployment", c.Name}, true
	case *corev1.Service:
		return childRef{"Service", c.Name}, true
	case *corev1.ConfigMap:
		return childRef{"ConfigMap", c.Name}, true
	case *autoscalingv2.HorizontalPodAutoscaler:
		return childRef{"HorizontalPodAutoscaler", c.Name}, true
	case *policyv1.PodDisruptionBudget:
		return childRef{"PodDisruptionBudget", c.Name}, true
	}
	return childRef{}, false
}

// progressing is the Progressing condition of a workspace whose takeover
// goes on or holds: it is never settled before the original children
// are gone. cur is the condition the Deployment alone gives; a rollout,
// a stuck one, or credentials being waited for say more than this, and
// stay.
func (t *takeover) progressing(cur metav1.Condition, ws *v1alpha1.Workspace) metav1.Condition {
	names := make([]string, len(t.legacy))
	for i, r := range t.legacy {
		names[i] = r.String()
	}
	list := strings.Join(names, ", ")
	c := metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonTakingOver}
	switch {
	case t.held == heldByAnnotation:
		c.Reason = v1alpha1.ReasonTakeoverHeld
		c.Message = fmt.Sprintf("%s is %q: the original operator's children (%s) are kept as they are; remove the annotation (kubectl formspec takeover roll) to take them over, which rolls the workspace's pods once", v1alpha1.AnnotationTakeover, v1alpha1.TakeoverHold, list)
		return c
	case cur.Status == metav1.ConditionTrue || cur.Reason == v1alpha1.ReasonProgressDeadlineExceeded:
		return cur
	case t.held == heldByCredentials:
		c.Message = fmt.Sprintf("the original operator's children (%s) are kept as they are until every datastore's credentials are injected, so that the pods roll once, onto them", list)
	case !t.deploymentOurs:
		c.Message = fmt.Sprintf("taking over the original operator's children (%s): the pods roll onto this version's template", list)
	case !t.serviceOurs:
		c.Message = fmt.Sprintf("taking over the original operator's children (%s): the new pods run; Service %s switches to them", list, ws.Name)
	default:
		c.Message = fmt.Sprintf("taking over the original operator's children: the new pods run; the rest is deleted: %s", list)
	}
	return c
}

// deploymentSelector is the selector of the workspace's Deployment and the
// labels every pod of the workspace carries for it. A Deployment's
// selector cannot change, so the one observed stays: for a Deployment the
// hooks made that is their own, for one of the original operator's its
// own (takeover rule 2); its labels go onto the pods, with the value the
// observed template has for a key only an expression names.
func deploymentSelector(o *observed, ours *metav1.LabelSelector) (*metav1.LabelSelector, map[string]string) {
	dep := o.deployment
	if dep == nil || dep.Spec.Selector == nil {
		return ours, ours.MatchLabels
	}
	sel := dep.Spec.Selector
	carry := maps.Clone(sel.MatchLabels)
	for _, e := range sel.MatchExpressions {
		if v, ok := dep.Spec.Template.Labels[e.Key]; ok {
			if carry == nil {
				carry = map[string]string{}
			}
			carry[e.Key] = v
		}
	}
	return sel, carry
}

// serviceOurs reports whether the workspace's observed Service is one the
// hooks made and selects as theirs do, or whether none is observed.
func serviceOurs(ws *v1alpha1.Workspace, c *Children) bool {
	svc := c.Services[metacontroller.Name(ws.Namespace, ws.Name)]
	if svc == nil {
		return true
	}
	return svc.Metadata.Labels.ours() && maps.Equal(svc.Spec.Selector, childMetaFor(ws).selector.MatchLabels)
}
