package kube

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// The reporter's watch of Workspaces, for the directive budget. Each
// replica's hook server sees only the syncs Metacontroller sends it, and
// Metacontroller keeps its connections to one replica for long stretches:
// the reporter elected to write directives may see few of the syncs that
// show a rollout's end, and a budget counted from those alone holds its
// places long after they free (a storm on the one-node cluster rolled one
// workspace at a time under a budget of three). The watch shows every
// Workspace's requested hash, the hash its pods run, its idle annotation
// and its phase as the API server has them; the budget counts from it once
// it has listed them all, and from the hook server's observations until
// then, or without it (no rights to list Workspaces, no cluster).

// watchedWorkspace is what the watch keeps of a Workspace: the cache holds
// this, not the object.
type watchedWorkspace struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	seen state.Watched
}

// DeepCopyObject makes watchedWorkspace a runtime.Object for the cache.
func (w *watchedWorkspace) DeepCopyObject() runtime.Object {
	c := *w
	c.ObjectMeta = *w.ObjectMeta.DeepCopy()
	return &c
}

// watchedOf keeps of a Workspace what the budget needs.
func watchedOf(u *unstructured.Unstructured) *watchedWorkspace {
	a := u.GetAnnotations()
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	running, _, _ := unstructured.NestedString(u.Object, "status", "artifactHash")
	class, _, _ := unstructured.NestedString(u.Object, "spec", "clusterClass")
	w := &watchedWorkspace{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion()},
		seen: state.Watched{
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
	for _, m := range u.GetManagedFields() {
		if m.FieldsV1 == nil || m.Time == nil {
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
			w.seen.HashSince = later(w.seen.HashSince, m.Time.Time)
		}
		if _, ok := fields.Metadata.Annotations["f:"+v1alpha1.AnnotationIdle]; ok {
			w.seen.IdleSince = later(w.seen.IdleSince, m.Time.Time)
		}
	}
	return w
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Watch watches the Workspaces until ctx ends, and tells st what it sees,
// for the budget.
func Watch(ctx context.Context, dyn dynamic.Interface, st *state.State, now func() time.Time, log *slog.Logger) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, WorkspacesResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return watchedOf(u), nil
		}
		return obj, nil
	}); err != nil {
		log.Error("cannot watch Workspaces; the budget counts from the hook server's observations", "err", err)
		return
	}
	seen := func(obj any) {
		if w, ok := obj.(*watchedWorkspace); ok {
			st.WatchWorkspace(w.seen, now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if w, ok := obj.(*watchedWorkspace); ok {
				st.UnwatchWorkspace(w.Namespace, w.Name)
			}
		},
	}); err != nil {
		log.Error("cannot watch Workspaces; the budget counts from the hook server's observations", "err", err)
		return
	}
	go inf.Run(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		st.WatchListed()
		log.Info("watching Workspaces: the directive budget counts from every Workspace")
	}
	<-ctx.Done()
}
