package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
)

// secrets is the resource the credentials Secrets are read from, as
// metadata only: their revision is an annotation, and their data is
// never read.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// claimHashes gives each granted ResourceClaim among related the
// credentialsHash this version's resourceclaim hook would give it, so that
// a change in how the hash is made (version 0.2.0 stopped deriving it from
// the credentials) shows as the roll it causes. The hook's hash is made of
// the claim's UID and the revision its credentials Secret carries
// (claims.CredentialsRevision), read here from the Secret's metadata; a
// Secret without one counts as revision 1, as the hook counts it. The
// credentials are taken to be what the Secret holds: a rotation under way
// shows once the hook has written it.
type claimHashes struct {
	meta metadata.Interface

	mu sync.Mutex
	// revisions holds, per namespace, the revision of each credentials
	// Secret by name, read once per diff.
	revisions map[string]*namespaceRevisions
}

type namespaceRevisions struct {
	once   sync.Once
	byName map[string]int64
	err    error
}

func newClaimHashes(meta metadata.Interface) *claimHashes {
	return &claimHashes{meta: meta, revisions: map[string]*namespaceRevisions{}}
}

// apply rewrites the credentialsHash of the granted claims in related.
// Without a metadata client it changes nothing.
func (h *claimHashes) apply(ctx context.Context, related metacontroller.ObjectMap) error {
	if h == nil || h.meta == nil {
		return nil
	}
	group := related[metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim")]
	for name, raw := range group {
		var c struct {
			Metadata struct {
				Namespace string    `json:"namespace"`
				UID       types.UID `json:"uid"`
			} `json:"metadata"`
			Status struct {
				CredentialsHash string `json:"credentialsHash"`
				Binding         *struct {
					Name string `json:"name"`
				} `json:"binding"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("related ResourceClaim %s: %w", name, err)
		}
		if c.Status.CredentialsHash == "" || c.Status.Binding == nil || c.Status.Binding.Name == "" {
			continue
		}
		revs, err := h.namespace(ctx, c.Metadata.Namespace)
		if err != nil {
			return err
		}
		rev, ok := revs[c.Status.Binding.Name]
		if !ok {
			// No Secret yet: the hook's first one is revision 1.
			rev = 1
		}
		want := claims.CredentialsHash(c.Metadata.UID, rev)
		if want == c.Status.CredentialsHash {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		obj["status"].(map[string]any)["credentialsHash"] = want
		if group[name], err = json.Marshal(obj); err != nil {
			return err
		}
	}
	return nil
}

// namespace reads the revisions of the credentials Secrets of a namespace.
func (h *claimHashes) namespace(ctx context.Context, namespace string) (map[string]int64, error) {
	h.mu.Lock()
	r := h.revisions[namespace]
	if r == nil {
		r = &namespaceRevisions{}
		h.revisions[namespace] = r
	}
	h.mu.Unlock()
	r.once.Do(func() {
		list, err := h.meta.Resource(secrets).Namespace(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: resourceclaim.LabelManagedBy + "=" + resourceclaim.ManagedBy,
		})
		if err != nil {
			r.err = fmt.Errorf("cannot list the credentials Secrets of namespace %s: %w", namespace, err)
			return
		}
		r.byName = map[string]int64{}
		for _, s := range list.Items {
			rev, err := strconv.ParseInt(s.Annotations[v1alpha1.AnnotationCredentialsRevision], 10, 64)
			if err != nil || rev < 1 {
				rev = 1
			}
			r.byName[s.Name] = rev
		}
	})
	return r.byName, r.err
}
