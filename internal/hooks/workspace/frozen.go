package workspace

import (
	"maps"
	"slices"
	"strings"

	"github.com/formspec/formspec-hooks/internal/codec"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// lastAppliedAnnotation is where Metacontroller's default apply keeps, on
// every child, the object it last applied: exactly what a previous sync
// asked for. (Server-side apply keeps no such copy.)
const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// freeze says how frozen children differ from what was last applied.
type freeze struct {
	// dropHPAs leaves the HorizontalPodAutoscalers out (teardown).
	dropHPAs bool
	// replicas, when set, is every Deployment's spec.replicas.
	replicas *int32
	// keepObservedReplicas sets each Deployment's spec.replicas to the
	// count it was observed with.
	keepObservedReplicas bool
	// only, when set, keeps only the children it accepts, by kind and
	// name.
	only func(kind, name string) bool
}

// frozen returns the observed children as they were last applied, in a
// stable order (by kind key, then by name), changed only as f says. A
// child without a usable last-applied annotation is kept as observed;
// encode.go then sends only its name, namespace, labels, annotations and
// spec (or data), never what the API server owns.
func frozen(o *observed, f freeze) ([]any, error) {
	c, err := o.whole()
	if err != nil {
		return nil, err
	}
	var out []any
	add := func(obj any) { out = append(out, obj) }
	// The kinds in the order of their keys.
	freezeEach(pick(c.ConfigMaps, "ConfigMap", f.only), add, nil)
	freezeEach(pick(c.Deployments, "Deployment", f.only), add, func(d *appsv1.Deployment) *int32 {
		if f.keepObservedReplicas {
			return d.Spec.Replicas
		}
		return f.replicas
	})
	if !f.dropHPAs {
		freezeEach(pick(c.HPAs, "HorizontalPodAutoscaler", f.only), add, nil)
	}
	freezeEach(pick(c.PDBs, "PodDisruptionBudget", f.only), add, nil)
	freezeEach(pick(c.Services, "Service", f.only), add, nil)
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// pick is the children of one kind that only accepts (all without it),
// by their keys "namespace/name".
func pick[T any](children map[string]*T, kind string, only func(kind, name string) bool) map[string]*T {
	if only == nil {
		return children
	}
	out := map[string]*T{}
	for key, c := range children {
		if _, name, _ := strings.Cut(key, "/"); only(kind, name) {
			out[key] = c
		}
	}
	return out
}

// freezeEach adds each child of one kind, by name. replicas, when set,
// gives the spec.replicas to write (nil: leave it).
func freezeEach[T any](children map[string]*T, add func(any), replicas func(*T) *int32) {
	for _, name := range slices.Sorted(maps.Keys(children)) {
		child := children[name]
		if child == nil {
			continue
		}
		var r *int32
		if replicas != nil {
			r = replicas(child)
		}
		applied := lastApplied(any(child).(metav1.Object))
		// A child kept as observed goes into the answer whole (encode.go's
		// short forms hold only what this package's builders set).
		switch {
		case applied == nil && r != nil:
			// Only Deployments have a replicas rule.
			any(child).(*appsv1.Deployment).Spec.Replicas = ptr.To(*r)
			add(observedChild{child})
		case applied == nil:
			add(observedChild{child})
		case r != nil:
			spec, _ := applied["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
				applied["spec"] = spec
			}
			spec["replicas"] = *r
			add(applied)
		default:
			add(applied)
		}
	}
}

// lastApplied recovers what was last applied for an observed child, or nil
// when it carries no usable annotation.
func lastApplied(obj metav1.Object) metacontroller.Object {
	s := obj.GetAnnotations()[lastAppliedAnnotation]
	if s == "" {
		return nil
	}
	var applied metacontroller.Object
	if err := codec.Unmarshal([]byte(s), &applied); err != nil || applied["kind"] == nil {
		return nil
	}
	return applied
}
