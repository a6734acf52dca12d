package workspace

import (
	"cmp"
	"fmt"

	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// This file is the second step of a Workspace hook: from what was observed
// to what is desired, as one value. Nothing here reads a clock other than
// Config.Now or talks to anything; the JSON it touches is its own business
// (frozen children decoded in full, spec.cache rendered for the ConfigMap).

// finalizeResync is how soon a finalize that is still waiting asks to be
// called again, in case no child event wakes it.
const finalizeResync = 5

// desired is one hook's decision: the status to write and the complete set
// of children, in a fixed order. Children are typed k8s.io/api objects
// built here or, when the workspace is frozen, what was last applied
// (frozen.go); encode.go turns them into the answer.
type desired struct {
	status    *v1alpha1.WorkspaceStatus
	children  []any
	resync    float64
	finalized bool
}

// decideSync computes what a sync asks for. An error is a bug, never a
// decision about the user's workspace.
func (h *Hooks) decideSync(o *observed) (*desired, error) {
	bindings := o.bindings()
	if stop := cmp.Or(o.invalidSpec, classMissing(o), o.summaryProblem); stop != nil {
		// Without a spec it can read or without its class, the hook does not
		// know the workspace's shape. Deleting the children would take a
		// running workspace down because of a slip elsewhere, so they are
		// kept as last applied until the problem is fixed, each Deployment
		// at the replica count it runs now: an HPA may have moved it since
		// the last apply, and sending the old count would make
		// Metacontroller fight the HPA for as long as the problem lasts.
		children, err := frozen(o, freeze{keepObservedReplicas: true})
		if err != nil {
			return nil, err
		}
		return &desired{status: h.status(o, bindings, stop, takeoverOf(o, bindings), nil), children: children}, nil
	}
	if o.claimsKept() {
		// No summary yet, and a Deployment runs: which credentials its pods
		// should mount is not known, so nothing changes until the reporter
		// says (Progressing, WaitingForClaimsSummary).
		children, err := frozen(o, freeze{keepObservedReplicas: true})
		if err != nil {
			return nil, err
		}
		return &desired{status: h.status(o, bindings, nil, takeoverOf(o, bindings), nil), children: children}, nil
	}
	t := takeoverOf(o, bindings)
	if t != nil && t.held != "" {
		// The original operator's children stay as they are (takeover.go).
		children, err := frozen(o, freeze{keepObservedReplicas: true})
		if err != nil {
			return nil, err
		}
		return &desired{status: h.status(o, bindings, nil, t, nil), children: children}, nil
	}

	var observedReplicas *int32
	if o.deployment != nil {
		observedReplicas = o.deployment.Spec.Replicas
	}
	s := scalingFor(o.ws, o.class, observedReplicas)
	meta := childMetaFor(o.ws)
	configMap, err := buildConfigMap(o.ws, meta)
	if err != nil {
		return nil, err
	}
	selector, carry := deploymentSelector(o, meta.selector)
	deployment, err := h.buildDeployment(o.ws, o.class, podInputs{
		scaling:      s,
		bindings:     bindings,
		configHash:   hashData(configMap.Data),
		artifactHash: artifactHash(o),
		meta:         meta,
		selector:     selector,
		carry:        carry,
	})
	if err != nil {
		return nil, err
	}
	children := []any{configMap, deployment, buildService(o.ws, meta, o.servicePort)}
	if s.hpa {
		children = append(children, buildHPA(o.ws, s, meta))
	}
	if pdb := buildPDB(o.ws, s, meta); pdb != nil {
		children = append(children, pdb)
	}
	if t != nil {
		if children, err = t.settle(o, children, carry, meta.selector.MatchLabels); err != nil {
			return nil, err
		}
	}
	a := h.judgeMissing(o)
	return &desired{status: h.status(o, bindings, nil, t, a), children: children, resync: a.resync}, nil
}

// decideFinalize tears the workspace down in order: first the HPA goes and
// the Deployment scales to zero, so that traffic drains through the normal
// pod shutdown; once no pod is left, everything else goes, and once nothing
// is observed the workspace is finalized. Credentials Secrets are the
// claims' attachments, not the workspace's children, and stay.
func (h *Hooks) decideFinalize(o *observed) (*desired, error) {
	d := &desired{status: h.status(o, o.bindings(), nil, nil, nil), children: []any{}}
	if o.children.count() == 0 {
		d.finalized = true
		return d, nil
	}
	d.resync = finalizeResync
	// status.replicas leaves out pods that are shutting down; they are
	// still serving their last requests and reading their configuration,
	// so the Service and ConfigMap wait for terminatingReplicas too (nil
	// where the DeploymentReplicaSetTerminatingReplicas gate is off).
	draining := o.hasHPA || (o.deployment != nil && (desiredReplicas(o.deployment) != 0 ||
		o.deployment.Status.Replicas != 0 || ptr.Deref(o.deployment.Status.TerminatingReplicas, 0) != 0))
	if draining {
		// Step one: everything but the HPA as last applied, with the
		// Deployment at zero replicas. Step two (not draining) is the
		// empty desired set, which deletes the rest.
		var err error
		if d.children, err = frozen(o, freeze{dropHPAs: true, replicas: ptr.To[int32](0)}); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// artifactHash picks the binary hash for the pod template: the workspace's
// annotation (a person's, or the reporter's for Cluster Control's
// restart_required), else the hash the running pods already carry. The
// latter keeps a restart in effect after the annotation is removed;
// dropping it would roll every pod back for nothing.
func artifactHash(o *observed) string {
	if v := o.ws.Annotations[v1alpha1.AnnotationArtifactBinaryHash]; v != "" {
		return v
	}
	if o.deployment != nil {
		return o.deployment.Spec.Template.Annotations[v1alpha1.AnnotationArtifactBinaryHash]
	}
	return ""
}

// classMissing is the problem of a workspace whose ClusterClass was not
// observed, or nil.
func classMissing(o *observed) *problem {
	switch {
	case o.class != nil || o.invalidSpec != nil:
		return nil
	case o.ws.Spec.ClusterClass == "":
		return &problem{reason: v1alpha1.ReasonClusterClassNotFound, message: "spec.clusterClass is empty; existing children are kept unchanged"}
	}
	return &problem{
		reason:  v1alpha1.ReasonClusterClassNotFound,
		message: fmt.Sprintf("ClusterClass %q not found; existing children are kept unchanged until it exists", o.ws.Spec.ClusterClass),
	}
}
