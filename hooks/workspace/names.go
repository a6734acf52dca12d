package workspace

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

// This file keeps the hooks off objects that are not the workspace's.
//
// Metacontroller applies every desired child with server-side apply and
// force, and an object of that kind and name that no controller owns is
// then overwritten and adopted, whatever it was: a Deployment someone
// made by hand, a Service another tool manages. (One another controller
// owns fails the apply: an object has one controller. A Deployment whose
// selector differs fails it too: the selector is immutable. Either way
// every sync fails, with nothing on the Workspace to say why.) The sync
// hook only sees the children Metacontroller has claimed, so the
// customize hook also asks for whatever Deployment, Service and ConfigMap
// bears a child's name; an object there that is not a claimed child makes
// the workspace Degraded, naming it, and nothing is created or changed
// until it is gone. Metacontroller resyncs the workspace when that object
// changes or goes, so a conflict resolves itself once someone removes it.
//
// HorizontalPodAutoscalers and PodDisruptionBudgets are not asked for:
// their status changes every few seconds, and Metacontroller matches every
// change of a related object against every parent (docs/workspaces.md).

// childNameRules are the related-resource rules for the objects at the
// names of the workspace's Deployment, Service and ConfigMap.
func childNameRules(namespace, name string) []metacontroller.RelatedResourceRule {
	return []metacontroller.RelatedResourceRule{
		{APIVersion: "apps/v1", Resource: "deployments", Namespace: namespace, Names: []string{name}},
		{APIVersion: "v1", Resource: "services", Namespace: namespace, Names: []string{name}},
		{APIVersion: "v1", Resource: "configmaps", Namespace: namespace, Names: []string{configMapName(name)}},
	}
}

// namedView is a related object at a child's name, as far as a sync reads
// it: whose it is.
type namedView struct {
	Metadata struct {
		OwnerReferences []ownerRef `json:"ownerReferences"`
	} `json:"metadata"`
}

// ownerRef is the part of an owner reference a sync reads.
type ownerRef struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	Controller *bool     `json:"controller"`
}

// controller is the object's controller reference, or nil.
func (v *namedView) controller() *ownerRef {
	for i, r := range v.Metadata.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return &v.Metadata.OwnerReferences[i]
		}
	}
	return nil
}

// nameConflict is the problem of the first child name (Deployment,
// Service, ConfigMap) taken by an object Metacontroller did not claim as
// the workspace's child, or nil.
func nameConflict(ws *v1alpha1.Workspace, children *Children, related *Related) *problem {
	checks := []struct {
		kind, name string
		related    map[string]*namedView
		claimed    bool
	}{
		{"Deployment", ws.Name, related.Deployments, children.Deployments[metacontroller.Name(ws.Namespace, ws.Name)] != nil},
		{"Service", ws.Name, related.Services, children.Services[metacontroller.Name(ws.Namespace, ws.Name)] != nil},
		{"ConfigMap", configMapName(ws.Name), related.ConfigMaps, children.ConfigMaps[metacontroller.Name(ws.Namespace, configMapName(ws.Name))] != nil},
	}
	for _, c := range checks {
		obj := c.related[metacontroller.Name(ws.Namespace, c.name)]
		if obj == nil || c.claimed {
			continue
		}
		what := fmt.Sprintf("%s %s/%s", c.kind, ws.Namespace, c.name)
		switch ref := obj.controller(); {
		case ref == nil:
			return &problem{reason: v1alpha1.ReasonChildNotOwned, message: what + " exists and no controller owns it: the hooks never take over an object they did not make, so the workspace's children are left as they are until it is deleted or renamed (if the original FormSpec operator made it, see docs/migrating.md)"}
		case ref.UID == ws.UID:
			// The original operator's child, owned by the Workspace but
			// without the label of Metacontroller's generated selector:
			// Metacontroller releases it before the hook is called, and
			// this request may still show it from before.
			return &problem{reason: v1alpha1.ReasonChildNotOwned, message: what + " is owned by this Workspace but lacks Metacontroller's controller-uid label, so Metacontroller releases it instead of taking it as a child: take the original operator's children over with kubectl formspec takeover prepare (docs/migrating.md)"}
		default:
			return &problem{reason: v1alpha1.ReasonChildOwnedByOther, message: fmt.Sprintf("%s is controlled by %s %s (%s): the hooks never take over an object another controller owns, so the workspace's children are left as they are until it is gone", what, ref.Kind, ref.Name, ref.APIVersion)}
		}
	}
	return nil
}
