package workspace

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
)

// Customize asks Metacontroller to show sync the workspace's ClusterClass
// and the ResourceClaims in its namespace.
func (h *Hooks) Customize(_ context.Context, req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	ws, err := decodeWorkspace(req.Parent)
	if err != nil {
		return nil, err
	}
	var rules []metacontroller.RelatedResourceRule
	if ws.Spec.ClusterClass != "" {
		rules = append(rules, metacontroller.RelatedResourceRule{
			APIVersion: v1alpha1.APIVersion,
			Resource:   "clusterclasses",
			Names:      []string{ws.Spec.ClusterClass},
		})
	}
	if len(ws.Spec.Datastores) > 0 {
		// Claims are found by what they say (spec.workspace), not by name,
		// so ask for all of them in the namespace and match in sync.
		rules = append(rules, metacontroller.RelatedResourceRule{
			APIVersion:    v1alpha1.APIVersion,
			Resource:      "resourceclaims",
			Namespace:     ws.Namespace,
			LabelSelector: &metav1.LabelSelector{},
		})
	}
	return &metacontroller.CustomizeResponse{RelatedResources: rules}, nil
}

// Sync computes the workspace's children and status.
func (h *Hooks) Sync(ctx context.Context, req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	o, err := decode(req)
	if err != nil {
		return nil, err
	}
	bindings := bindingsFor(o.ws, o.claims)
	if o.class == nil {
		// Without its class the workspace's shape is unknown. Deleting the
		// children would take a running workspace down because of a
		// configuration slip elsewhere, so they are kept as last applied
		// until the class is back.
		children, err := frozen(req.Children, func(key string, obj metacontroller.Object) (metacontroller.Object, bool) {
			// Frozen means as it is now. An HPA may have moved the
			// replica count since the last apply, and sending the old
			// count would make Metacontroller fight it for as long as the
			// class is missing.
			if key == keyDeployment && o.deployment != nil && o.deployment.Spec.Replicas != nil {
				if spec, ok := obj["spec"].(map[string]any); ok {
					spec["replicas"] = *o.deployment.Spec.Replicas
				}
			}
			return obj, true
		})
		if err != nil {
			return nil, err
		}
		status := h.status(o, bindings, classMissing(o.ws))
		h.report(observation.WorkspaceObservation(o.ws, status))
		return &metacontroller.CompositeResponse{Status: status, Children: children}, nil
	}

	d := &desired{bindings: bindings}
	var observedReplicas *int32
	if o.deployment != nil {
		observedReplicas = o.deployment.Spec.Replicas
	}
	d.scaling = scalingFor(o.ws, o.class, observedReplicas)
	d.artifactHash = h.artifactHash(ctx, o)
	if d.configMap, err = buildConfigMap(o.ws); err != nil {
		return nil, err
	}
	if d.deployment, err = h.buildDeployment(o.ws, o.class, d); err != nil {
		return nil, err
	}
	d.service = buildService(o.ws)
	if d.scaling.hpa {
		d.hpa = buildHPA(o.ws, d.scaling)
	}
	d.pdb = buildPDB(o.ws, d.scaling)

	children := make([]metacontroller.Object, 0, 5)
	for _, obj := range d.objects() {
		wire, err := metacontroller.ToObject(obj)
		if err != nil {
			return nil, err
		}
		children = append(children, wire)
	}
	status := h.status(o, bindings, nil)
	h.report(observation.WorkspaceObservation(o.ws, status).WithClass(o.class))
	return &metacontroller.CompositeResponse{Status: status, Children: children}, nil
}

// report hands an observation to the reporter sidecar. It is the hooks' one
// effect outside their answer, and it cannot slow or fail a sync: Send only
// puts the observation on a bounded queue (dropping the oldest when full),
// and Cluster Control is told about what was observed, never about what a
// sync merely asked for.
func (h *Hooks) report(obs observation.Observation) {
	if h.cfg.Reports != nil {
		h.cfg.Reports.Send(obs)
	}
}

// artifactHash picks the binary hash for the pod template: the workspace's
// annotation, else Cluster Control's restart directive, else the hash the
// running pods already carry. The last keeps a consumed directive in
// effect after the reporter forgets it; dropping it would roll every pod
// back for nothing.
func (h *Hooks) artifactHash(ctx context.Context, o *observed) string {
	if v := o.ws.Annotations[v1alpha1.AnnotationArtifactBinaryHash]; v != "" {
		return v
	}
	if h.cfg.Directives != nil {
		ctx, cancel := context.WithTimeout(ctx, h.cfg.DirectiveTimeout)
		defer cancel()
		if v, ok := h.cfg.Directives.RestartDirective(ctx, o.ws.Namespace, o.ws.Name); ok && v != "" {
			return v
		}
	}
	if o.deployment != nil {
		return o.deployment.Spec.Template.Annotations[v1alpha1.AnnotationArtifactBinaryHash]
	}
	return ""
}

func classMissing(ws *v1alpha1.Workspace) *problem {
	if ws.Spec.ClusterClass == "" {
		return &problem{reason: "ClusterClassNotFound", message: "spec.clusterClass is empty; existing children are kept unchanged"}
	}
	return &problem{
		reason:  "ClusterClassNotFound",
		message: fmt.Sprintf("ClusterClass %q not found; existing children are kept unchanged until it exists", ws.Spec.ClusterClass),
	}
}

func decodeWorkspace(raw json.RawMessage) (*v1alpha1.Workspace, error) {
	ws := &v1alpha1.Workspace{}
	if err := metacontroller.Decode(raw, ws, "Workspace"); err != nil {
		return nil, err
	}
	return ws, nil
}
