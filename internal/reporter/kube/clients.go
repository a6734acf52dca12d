// Package kube is the reporter's way into the Kubernetes API, and its only
// one: the patches that write an annotation onto a Workspace (patch.go),
// the Events about users' objects, rate-limited (events.go), the Lease
// that elects the one reporter writing directives (lease.go), and the
// watch of Workspaces the directive budget counts from (watch.go). What
// to write, and when, the reporter and its state decide.
package kube

import (
	"k8s.io/client-go/dynamic"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
)

// Clients are the reporter's only ways into the Kubernetes API; its
// RBAC allows nothing else (deploy/reporter).
type Clients struct {
	// Dynamic patches formspec.dev/v1alpha1 Workspaces, and lists and
	// watches them for the directive budget.
	Dynamic dynamic.Interface
	// Events creates and patches events.k8s.io/v1 Events.
	Events typedeventsv1.EventsV1Interface
	// Leases gets, creates and updates the coordination.k8s.io/v1 Lease
	// that elects the reporter writing directives; nil: no election.
	Leases typedcoordinationv1.LeasesGetter
}
