package workspace

import (
	"context"

	"github.com/formspec/formspec-hooks/internal/codec"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// Sync computes the workspace's children and status. The path is straight:
// observe (observed.go) → decide (decide.go) → hand the observed status to
// the reporter → answer (encode.go).
func (h *Hooks) Sync(_ context.Context, req *Request) (*metacontroller.CompositeResponse, error) {
	o := observe(req)
	h.claimsOf(o, req)
	d, err := h.decideSync(o)
	if err != nil {
		return nil, err
	}
	h.report(observation.WorkspaceObservation(o.ws, d.status, h.cfg.Now()).WithClass(o.class))
	return d.response(), nil
}

// Finalize tears the workspace down in order (decideFinalize), and tells
// the reporter once nothing is left.
func (h *Hooks) Finalize(_ context.Context, req *Request) (*metacontroller.CompositeResponse, error) {
	o := observe(req)
	h.claimsOf(o, req)
	d, err := h.decideFinalize(o)
	if err != nil {
		return nil, err
	}
	if d.finalized {
		h.report(observation.WorkspaceDeletedObservation(o.ws, h.cfg.Now()))
	} else {
		h.report(observation.WorkspaceObservation(o.ws, d.status, h.cfg.Now()))
	}
	return d.response(), nil
}

// report hands an observation to the reporter sidecar. It is the hooks' one
// effect outside their answer, and it cannot slow or fail a sync: Send only
// puts the observation on a bounded queue (dropping the oldest when full),
// and Cluster Control is told about what was observed, never about what a
// sync merely asked for.
func (h *Hooks) report(obs observation.Observation) {
	h.cfg.Reports.Send(obs)
}

// customizeSpec is the part of a Workspace spec that Customize reads. The
// rest of the spec is not decoded, so a wrongly typed passthrough field
// does not stop sync from being called to report it.
type customizeSpec struct {
	ClusterClass string                  `json:"clusterClass"`
	Datastores   []v1alpha1.DatastoreRef `json:"datastores"`
}

// Customize asks Metacontroller to show sync the workspace's ClusterClass
// and, in related mode (ClaimsRelated), the ResourceClaims in its
// namespace. In summary mode the claims reach sync on the Workspace
// itself (claims.go).
func (h *Hooks) Customize(_ context.Context, req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	var parent struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec codec.RawMessage `json:"spec"`
	}
	if err := metacontroller.Decode(req.Parent, &parent, "Workspace"); err != nil {
		return nil, err
	}
	// A spec that does not decode asks for nothing; sync then reports it
	// as InvalidSpec.
	var spec customizeSpec
	if len(parent.Spec) > 0 && codec.Unmarshal(parent.Spec, &spec) != nil {
		spec = customizeSpec{}
	}
	var rules []metacontroller.RelatedResourceRule
	if spec.ClusterClass != "" {
		rules = append(rules, metacontroller.RelatedResourceRule{
			APIVersion: v1alpha1.APIVersion,
			Resource:   "clusterclasses",
			Names:      []string{spec.ClusterClass},
		})
	}
	if len(spec.Datastores) > 0 && h.cfg.Claims == ClaimsRelated {
		// Claims are found by what they say (spec.workspace), not by name,
		// so ask for all of them in the namespace and match in sync.
		rules = append(rules, metacontroller.RelatedResourceRule{
			APIVersion:    v1alpha1.APIVersion,
			Resource:      "resourceclaims",
			Namespace:     parent.Metadata.Namespace,
			LabelSelector: &metav1.LabelSelector{},
		})
	}
	return &metacontroller.CustomizeResponse{RelatedResources: rules}, nil
}
