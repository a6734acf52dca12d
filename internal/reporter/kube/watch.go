package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// The reporter's one watch of Workspaces. Two parts of the reporter read
// it: the directive budget (Watch) and the claims summary writer
// (package claimsync). One watch serves both, so the API server sends
// each Workspace change to a reporter once, the reporter decodes it once
// and its cache holds one small entry per Workspace.
//
// Why the budget watches: each replica's hook server sees only the syncs
// Metacontroller sends it, and Metacontroller keeps its connections to
// one replica for long stretches, so the reporter elected to write
// directives may see few of the syncs that show a rollout's end, and a
// budget counted from those alone holds its places long after they free
// (a storm on the one-node cluster rolled one workspace at a time under a
// budget of three). The watch shows every Workspace's requested hash, the
// hash its pods run, its idle annotation and its phase as the API server
// has them; the budget counts from it once it has listed them all, and
// from the hook server's observations until then, or without it (no
// rights to list Workspaces, no cluster).

// Workspace is what the watch keeps of a Workspace: the cache holds this,
// not the object.
type Workspace struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Seen is what the directive budget reads.
	Seen state.Watched
	// Datastores is spec.datastores, what the claims summary is computed
	// from.
	Datastores []v1alpha1.DatastoreRef
	// Claims is the claims summary annotation; HasClaims tells an empty
	// one from none.
	Claims    string
	HasClaims bool
}

// DeepCopyObject makes Workspace a runtime.Object for the cache. Nothing
// modifies a cached Workspace, so Datastores is shared.
func (w *Workspace) DeepCopyObject() runtime.Object {
	c := *w
	c.ObjectMeta = *w.ObjectMeta.DeepCopy()
	return &c
}

// Key is the Workspace's namespace and name.
func (w *Workspace) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
}

// WorkspaceOf keeps of a Workspace what the budget and the claims summary
// read. A spec.datastores the API server should never have accepted (it
// validates the schema) reads as the entries that decode.
func WorkspaceOf(u *unstructured.Unstructured) *Workspace {
	a := u.GetAnnotations()
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	running, _, _ := unstructured.NestedString(u.Object, "status", "artifactHash")
	class, _, _ := unstructured.NestedString(u.Object, "spec", "clusterClass")
	w := &Workspace{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion()},
		Seen: state.Watched{
			Name: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()},
			UID:  u.GetUID(),
			Milestones: observation.Milestones{
				Class: class, Phase: phase, ArtifactHash: running,
				WantedArtifactHash: a[v1alpha1.AnnotationArtifactBinaryHash],
				Idle:               a[v1alpha1.AnnotationIdle] == "true",
				Terminating:        u.GetDeletionTimestamp() != nil,
			},
		},
	}
	w.Claims, w.HasClaims = a[claimsummary.Annotation]
	entries, _, _ := unstructured.NestedSlice(u.Object, "spec", "datastores")
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		w.Datastores = append(w.Datastores, v1alpha1.DatastoreRef{Name: name, Namespace: ns})
	}
	w.Seen.HashSince, w.Seen.IdleSince = annotationsWritten(u.GetManagedFields())
	return w
}

// The managed fields' keys of the two annotations the budget times.
var (
	hashField = []byte(`"f:` + v1alpha1.AnnotationArtifactBinaryHash + `"`)
	idleField = []byte(`"f:` + v1alpha1.AnnotationIdle + `"`)
)

// annotationsWritten is when the field managers owning the artifact hash
// and idle annotations last wrote, the zero time for one nobody owns.
// Most entries own neither (Metacontroller's status writes, the hooks'
// own annotations), and are passed over without decoding them.
func annotationsWritten(managed []metav1.ManagedFieldsEntry) (hash, idle time.Time) {
	for _, m := range managed {
		if m.FieldsV1 == nil || m.Time == nil {
			continue
		}
		if !bytes.Contains(m.FieldsV1.Raw, hashField) && !bytes.Contains(m.FieldsV1.Raw, idleField) {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields.Metadata.Annotations["f:"+v1alpha1.AnnotationArtifactBinaryHash]; ok {
			hash = later(hash, m.Time.Time)
		}
		if _, ok := fields.Metadata.Annotations["f:"+v1alpha1.AnnotationIdle]; ok {
			idle = later(idle, m.Time.Time)
		}
	}
	return hash, idle
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// NewWorkspaceInformer is the reporter's watch of Workspaces, its cache
// holding a *Workspace for each. It starts nothing: Watch runs it, and
// the claims summary writer adds its handlers to it.
func NewWorkspaceInformer(dyn dynamic.Interface) (cache.SharedIndexInformer, error) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, WorkspacesResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(Keep(func(u *unstructured.Unstructured) any { return WorkspaceOf(u) })); err != nil {
		return nil, fmt.Errorf("cannot watch Workspaces: %w", err)
	}
	return inf, nil
}

// Keep is an informer transform that caches keep's digest of each object
// instead of the object.
func Keep(keep func(*unstructured.Unstructured) any) cache.TransformFunc {
	return func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return keep(u), nil
		}
		return obj, nil
	}
}

// Final is the object a delete event carries, whether or not the watch
// saw the deletion itself.
func Final(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// Watch runs inf (NewWorkspaceInformer) until ctx ends, and tells st what
// it sees, for the budget. The informer runs even if the budget cannot
// follow it: the claims summary writer reads it too.
func Watch(ctx context.Context, inf cache.SharedIndexInformer, st *state.State, now func() time.Time, log *slog.Logger) {
	seen := func(obj any) {
		if w, ok := obj.(*Workspace); ok {
			st.WatchWorkspace(w.Seen, now())
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if w, ok := Final(obj).(*Workspace); ok {
				st.UnwatchWorkspace(w.Namespace, w.Name)
			}
		},
	})
	if err != nil {
		log.Error("cannot watch Workspaces; the budget counts from the hook server's observations", "err", err)
	}
	go inf.Run(ctx.Done())
	// The budget counts from the watch once every Workspace listed has
	// been handed to it.
	if err == nil && cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		st.WatchListed()
		log.Info("watching Workspaces: the directive budget counts from every Workspace")
	}
	<-ctx.Done()
}
