package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
)

// lastAppliedAnnotation is where Metacontroller keeps, on every child, the
// object it last applied: exactly what a previous sync asked for.
const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// finalizeResync is how soon a finalize that is still waiting asks to be
// called again, in case no child event wakes it.
const finalizeResync = 5

// Finalize tears the workspace down in order: first the HPA goes and the
// Deployment scales to zero, so that traffic drains through the normal pod
// shutdown; once no pod is left, everything else goes. Credentials Secrets
// are the claims' attachments, not the workspace's children, and stay.
func (h *Hooks) Finalize(_ context.Context, req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	o, err := decode(req)
	if err != nil {
		return nil, err
	}
	status := h.status(o, bindingsFor(o.ws, o.claims), nil)
	resp := &metacontroller.CompositeResponse{Status: status, Children: []metacontroller.Object{}}
	if req.Children.Count() == 0 {
		resp.Finalized = true
		h.report(observation.WorkspaceDeletedObservation(o.ws))
		return resp, nil
	}
	h.report(observation.WorkspaceObservation(o.ws, status))
	resp.ResyncAfterSeconds = finalizeResync

	// status.replicas leaves out pods that are shutting down; they are
	// still serving their last requests and reading their configuration,
	// so the Service and ConfigMap wait for terminatingReplicas too (nil
	// where the DeploymentReplicaSetTerminatingReplicas gate is off).
	draining := o.hpa != nil || (o.deployment != nil && (desiredReplicas(o.deployment) != 0 ||
		o.deployment.Status.Replicas != 0 || ptr.Deref(o.deployment.Status.TerminatingReplicas, 0) != 0))
	if !draining {
		// Step two: nothing runs any more; an empty desired set deletes
		// the rest.
		return resp, nil
	}
	// Step one: keep everything but the HPA as last applied, with the
	// Deployment at zero replicas.
	resp.Children, err = frozen(req.Children, func(key string, obj metacontroller.Object) (metacontroller.Object, bool) {
		switch key {
		case keyHPA:
			return nil, false
		case keyDeployment:
			spec, _ := obj["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
				obj["spec"] = spec
			}
			spec["replicas"] = 0
		}
		return obj, true
	})
	return resp, err
}

// frozen returns the observed children as they were last applied, in a
// stable order, passing each through edit when it is set (edit may drop a
// child by returning false). A child Metacontroller never applied (no
// annotation) is kept as observed, minus what the server owns.
func frozen(children metacontroller.ObjectMap, edit func(key string, obj metacontroller.Object) (metacontroller.Object, bool)) ([]metacontroller.Object, error) {
	out := []metacontroller.Object{}
	for _, key := range slices.Sorted(maps.Keys(children)) {
		for _, name := range slices.Sorted(maps.Keys(children[key])) {
			raw := children[key][name]
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			obj, err := lastApplied(raw)
			if err != nil {
				return nil, fmt.Errorf("cannot read observed %s %q: %w", key, name, err)
			}
			if edit != nil {
				var keep bool
				if obj, keep = edit(key, obj); !keep {
					continue
				}
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// lastApplied recovers what was last applied for an observed child.
func lastApplied(raw json.RawMessage) (metacontroller.Object, error) {
	var observed metacontroller.Object
	if err := json.Unmarshal(raw, &observed); err != nil {
		return nil, err
	}
	meta, _ := observed["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	if s, ok := annotations[lastAppliedAnnotation].(string); ok && s != "" {
		var applied metacontroller.Object
		if err := json.Unmarshal([]byte(s), &applied); err == nil && applied["kind"] != nil {
			return applied, nil
		}
	}
	out := metacontroller.Object{}
	for k, v := range observed {
		if k != "status" && k != "metadata" {
			out[k] = v
		}
	}
	keep := map[string]any{}
	for _, k := range []string{"name", "namespace", "labels", "annotations"} {
		if v, ok := meta[k]; ok {
			keep[k] = v
		}
	}
	if a, ok := keep["annotations"].(map[string]any); ok {
		delete(a, lastAppliedAnnotation)
	}
	out["metadata"] = keep
	return out, nil
}
