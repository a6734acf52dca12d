package workspace

import (
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// DatastoreClaim is one spec.datastores entry of a Workspace with the
// ResourceClaim serving it, as the sync hook matches them.
type DatastoreClaim struct {
	// Datastore is the spec.datastores entry.
	Datastore v1alpha1.DatastoreRef
	// Claim is the claim the hook would use; nil when no claim names this
	// workspace and datastore.
	Claim *v1alpha1.ResourceClaim
	// State is what the hook makes of it: Injected, Pending, Denied or
	// Missing (v1alpha1.Datastore*).
	State string
}

// MatchClaims matches each spec.datastores entry of ws with a claim among
// claims by the sync hook's own rules (the same entry written twice counts
// once; a Ready claim wins over the others, then the first by name), for
// tools that explain a workspace without repeating those rules.
func MatchClaims(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) []DatastoreClaim {
	byName := make(map[string]*v1alpha1.ResourceClaim, len(claims))
	for _, c := range claims {
		if c.Namespace == ws.Namespace {
			byName[c.Name] = c
		}
	}
	bindings := bindingsFor(ws, claims)
	out := make([]DatastoreClaim, len(bindings))
	for i, b := range bindings {
		out[i] = DatastoreClaim{Datastore: b.ref, State: b.status.State}
		if b.status.Claim != "" {
			out[i].Claim = byName[b.status.Claim]
		}
	}
	return out
}
