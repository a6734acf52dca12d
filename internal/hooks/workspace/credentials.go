package workspace

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
)

// binding is one datastore entry of a workspace and what its claim allows.
type binding struct {
	ref    v1alpha1.DatastoreRef
	status v1alpha1.WorkspaceDatastoreStatus
	// hash is the claim's credentialsHash, set when injected.
	hash string
}

// injected reports whether the binding's Secret goes into the pods.
func (b binding) injected() bool { return b.status.State == v1alpha1.DatastoreInjected }

// bindingsFor matches each spec.datastores entry with a ResourceClaim in the
// workspace's namespace that names this workspace and that datastore. Only
// a claim verified Ready that names its credentials Secret is injected;
// everything else is reported so the workspace can say what it is waiting
// for.
func bindingsFor(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) []binding {
	entries := claimsummary.Match(ws, claims)
	out := make([]binding, 0, len(entries))
	for _, m := range entries {
		ref := m.Ref
		b := binding{ref: ref, status: v1alpha1.WorkspaceDatastoreStatus{Name: ref.Name, State: v1alpha1.DatastoreMissing}}
		if c := m.Claim; c != nil {
			b.status.Claim = c.Name
			switch {
			case claimsummary.Ready(c):
				b.status.State = v1alpha1.DatastoreInjected
				b.status.SecretName = c.Status.Binding.Name
				b.hash = c.Status.CredentialsHash
			case meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionDenied):
				b.status.State = v1alpha1.DatastoreDenied
			default:
				b.status.State = v1alpha1.DatastorePending
			}
		}
		out = append(out, b)
	}
	return out
}

// credentialsHash folds the injected claims' hashes into one value for the
// pod template, so that a rotated credential rolls the pods. Empty when
// nothing is injected.
func credentialsHash(bindings []binding) string {
	h := sha256.New()
	n := 0
	for _, b := range bindings {
		if !b.injected() {
			continue
		}
		n++
		h.Write([]byte(b.status.Claim + "=" + b.hash + "\n"))
	}
	if n == 0 {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
