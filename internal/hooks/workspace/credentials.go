package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
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
	byStore := claimsByDatastore(ws, claims)
	out := make([]binding, 0, len(ws.Spec.Datastores))
	seen := map[string]bool{}
	for _, ref := range ws.Spec.Datastores {
		// The same datastore written twice (once with the workspace's own
		// namespace, once without) would mount one Secret twice under one
		// volume name, and the API server refuses such a Deployment. The
		// first entry wins.
		ns := ref.Namespace
		if ns == "" {
			ns = ws.Namespace
		}
		if seen[ns+"/"+ref.Name] {
			continue
		}
		seen[ns+"/"+ref.Name] = true
		b := binding{ref: ref, status: v1alpha1.WorkspaceDatastoreStatus{Name: ref.Name, State: v1alpha1.DatastoreMissing}}
		if c := bestClaim(byStore[ns+"/"+ref.Name]); c != nil {
			b.status.Claim = c.Name
			switch {
			case claimReady(c):
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

// claimsByDatastore groups the claims that name this workspace by the
// datastore they ask for, "namespace/name". Matching every spec.datastores
// entry through it stays linear in entries plus claims, however many of
// each a request carries (a forged one is not held to the CRD's maxItems).
func claimsByDatastore(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) map[string][]*v1alpha1.ResourceClaim {
	out := map[string][]*v1alpha1.ResourceClaim{}
	for _, c := range claims {
		if c.Namespace != ws.Namespace || c.Spec.Workspace != ws.Name {
			continue
		}
		ns := c.Spec.Datastore.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		key := ns + "/" + c.Spec.Datastore.Name
		out[key] = append(out[key], c)
	}
	return out
}

// bestClaim picks the claim serving a datastore among those asking for it.
// When several do, a ready one wins, then the first by name, so the choice
// does not depend on map order.
func bestClaim(matches []*v1alpha1.ResourceClaim) *v1alpha1.ResourceClaim {
	if len(matches) == 0 {
		return nil
	}
	return slices.MinFunc(matches, func(a, b *v1alpha1.ResourceClaim) int {
		if ra, rb := claimReady(a), claimReady(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// claimReady is true when the claim's last verdict was Ready and names
// the Secret to inject, and the claim is not going away. A verdict older
// than the claim's spec still counts: when a claim is edited, Metacontroller
// resyncs the workspace while the resourceclaim hook re-verifies, and
// dropping the credentials for that moment would roll every pod twice. A
// grant the re-verification denies loses its Secret (and this status) a
// moment later.
func claimReady(c *v1alpha1.ResourceClaim) bool {
	if c.DeletionTimestamp != nil {
		return false
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady) &&
		c.Status.Binding != nil && c.Status.Binding.Name != ""
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
