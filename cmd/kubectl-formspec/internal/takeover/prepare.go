// Package takeover prepares, for `kubectl formspec takeover`, a cluster
// that the original FormSpec operator ran for the workspace hooks under
// Metacontroller (docs/migrating.md), and rolls the takeover out a few
// workspaces at a time.
//
// Metacontroller claims a Workspace's children before it calls the sync
// hook: an object whose controller owner reference is the Workspace but
// which lacks the label of the generated selector (controller-uid: the
// Workspace's UID) is released, its owner reference removed, before the
// hook can say anything about it. So the original operator's children are
// labelled before Metacontroller first syncs their Workspace. And
// Metacontroller applies children with server-side apply: fields the
// original operator set (its container, its environment) would stay
// forever under that operator's field manager, however the hooks render
// the child. So their ownership moves to Metacontroller's field manager,
// as kubectl moves client-side-applied fields to server-side apply
// (client-go's csaupgrade), and the hooks' first apply leaves only what
// they render.
package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/csaupgrade"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/live"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// PrepareOptions configure Prepare.
type PrepareOptions struct {
	Dynamic dynamic.Interface
	// FieldManager is Metacontroller's server-side apply field manager,
	// which takes over the fields of the original operator's managers.
	FieldManager string
	// Self is the field manager of Prepare's own writes.
	Self string
	// Managers are field managers to move besides those found: the ones
	// that set each child's owner reference to its Workspace.
	Managers []string
	// Hold sets formspec.dev/takeover: hold on every Workspace with
	// children to take over.
	Hold bool
	// DryRun has the API server check every write without making it.
	DryRun bool
	// Workers is how many Workspaces are prepared at once.
	Workers int
}

// Prepared is what Prepare did for one Workspace.
type Prepared struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Children are the original operator's children, found by their
	// controller owner reference to the Workspace.
	Children []Child `json:"children,omitempty"`
	// Held: the Workspace carries formspec.dev/takeover: hold now.
	Held bool `json:"held,omitempty"`
	// Conflicts are objects at the names of the Workspace's children that
	// are not its own, which the hooks will not take over.
	Conflicts []string `json:"conflicts,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Child is one child of the original operator.
type Child struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Labelled: it did not carry the controller-uid label, and does now.
	Labelled bool `json:"labelled,omitempty"`
	// Moved are the field managers whose fields now belong to
	// Metacontroller's.
	Moved []string `json:"moved,omitempty"`
}

// Prepare labels the original operator's children of every Workspace in
// namespace ("" for all) and moves their fields to Metacontroller's field
// manager; with Hold it holds each such Workspace. It is safe to run again:
// what is done already is left alone.
func Prepare(ctx context.Context, opts PrepareOptions, namespace string) ([]Prepared, error) {
	list, err := opts.Dynamic.Resource(live.Workspaces).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list Workspaces: %w", err)
	}
	objects, err := childObjects(ctx, opts.Dynamic, list.Items)
	if err != nil {
		return nil, err
	}
	out := make([]Prepared, len(list.Items))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(opts.Workers, 1))
	for i := range list.Items {
		g.Go(func() error {
			ws := &list.Items[i]
			out[i] = Prepared{Namespace: ws.GetNamespace(), Name: ws.GetName()}
			if err := prepare(ctx, opts, ws, objects[ws.GetNamespace()], &out[i]); err != nil {
				out[i].Error = err.Error()
			}
			return ctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Prepared) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// childObjects lists the objects of the workspace controller's child kinds
// in each namespace that holds a Workspace, each with its apiVersion and
// kind set.
func childObjects(ctx context.Context, dyn dynamic.Interface, workspaces []unstructured.Unstructured) (map[string][]*unstructured.Unstructured, error) {
	out := map[string][]*unstructured.Unstructured{}
	namespaces := sets.New[string]()
	for i := range workspaces {
		namespaces.Insert(workspaces[i].GetNamespace())
	}
	for _, ns := range sets.List(namespaces) {
		for _, cr := range live.ChildResources {
			list, err := dyn.Resource(cr.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("cannot list %s in %s: %w", cr.Resource.GroupResource(), ns, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				obj.SetAPIVersion(cr.APIVersion())
				obj.SetKind(cr.Kind)
				out[ns] = append(out[ns], obj)
			}
		}
	}
	return out, nil
}

// prepare prepares one Workspace.
func prepare(ctx context.Context, opts PrepareOptions, ws *unstructured.Unstructured, objects []*unstructured.Unstructured, res *Prepared) error {
	uid := ws.GetUID()
	var errs []error
	original := false
	for _, obj := range objects {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || ref.UID != uid {
			continue
		}
		if obj.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedBy {
			// The hooks' own child: nothing to take over.
			continue
		}
		original = true
		child, err := prepareChild(ctx, opts, ws, obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Children = append(res.Children, child)
	}
	res.Conflicts = conflicts(ws, objects)
	if original && opts.Hold && len(errs) == 0 {
		held, err := hold(ctx, opts, ws)
		if err != nil {
			errs = append(errs, err)
		}
		res.Held = held
	} else {
		res.Held = ws.GetAnnotations()[v1alpha1.AnnotationTakeover] == v1alpha1.TakeoverHold
	}
	return errors.Join(errs...)
}

// prepareChild labels one child for Metacontroller's generated selector
// and moves the fields of its original managers to Metacontroller's, in
// one write that fails if the child changed since it was read; on such a
// conflict it reads the child again and retries.
func prepareChild(ctx context.Context, opts PrepareOptions, ws, obj *unstructured.Unstructured) (Child, error) {
	child := Child{Kind: obj.GetKind(), Name: obj.GetName()}
	cr := resourceOf(obj)
	client := opts.Dynamic.Resource(cr.Resource).Namespace(obj.GetNamespace())
	for attempt := 0; ; attempt++ {
		patch, labelled, moved, err := preparePatch(opts, ws.GetUID(), obj)
		if err != nil {
			return child, fmt.Errorf("%s %s: %w", child.Kind, child.Name, err)
		}
		child.Labelled, child.Moved = labelled, moved
		if patch == nil {
			return child, nil
		}
		po := metav1.PatchOptions{FieldManager: opts.Self}
		if opts.DryRun {
			po.DryRun = []string{metav1.DryRunAll}
		}
		_, err = client.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, po)
		switch {
		case err == nil:
			return child, nil
		case apierrors.IsConflict(err) && attempt < 3:
			if obj, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
				return child, fmt.Errorf("%s %s: %w", child.Kind, child.Name, err)
			}
			obj.SetAPIVersion(cr.APIVersion())
			obj.SetKind(cr.Kind)
		default:
			return child, fmt.Errorf("%s %s: %w", child.Kind, child.Name, err)
		}
	}
}

// preparePatch is the JSON patch that prepares obj, or nil when it is
// prepared already: the controller-uid label, and the managed fields with
// the original managers' merged into Metacontroller's Apply entry. It
// carries the resourceVersion it was computed from, so that a write in
// between fails it instead of being overwritten.
func preparePatch(opts PrepareOptions, uid types.UID, obj *unstructured.Unstructured) ([]byte, bool, []string, error) {
	managers := originalManagers(obj, uid, opts.FieldManager)
	for _, m := range opts.Managers {
		if m != opts.FieldManager && hasUpdateEntry(obj, m) && !slices.Contains(managers, m) {
			managers = append(managers, m)
		}
	}
	slices.Sort(managers)
	labelled := obj.GetLabels()[live.ControllerUIDLabel] != string(uid)
	if !labelled && len(managers) == 0 {
		return nil, false, nil, nil
	}
	ops := []map[string]any{
		// "replace" rather than "test", so that a stale read is a 409
		// from the storage, not a 422 from the patch.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
	}
	if len(managers) > 0 {
		moved := obj.DeepCopy()
		if err := csaupgrade.UpgradeManagedFields(moved, sets.New(managers...), opts.FieldManager); err != nil {
			return nil, false, nil, fmt.Errorf("cannot move the fields of %v to %s: %w", managers, opts.FieldManager, err)
		}
		ops = append(ops, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": moved.GetManagedFields()})
	}
	if labelled {
		if obj.GetLabels() == nil {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{live.ControllerUIDLabel: string(uid)}})
		} else {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + live.ControllerUIDLabel, "value": string(uid)})
		}
	}
	patch, err := json.Marshal(ops)
	return patch, labelled, managers, err
}

// originalManagers are the field managers that wrote obj's controller
// owner reference to the Workspace with an update (as a controller-runtime
// operator's Create and Update do): the original operator, whose fields
// Metacontroller's field manager takes over. Metacontroller's own entry,
// and the entries of a subresource (status), are never moved.
func originalManagers(obj *unstructured.Unstructured, uid types.UID, fieldManager string) []string {
	key := fmt.Sprintf(`k:{"uid":%q}`, string(uid))
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager == fieldManager || e.Operation != metav1.ManagedFieldsOperationUpdate || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields["f:metadata"]["f:ownerReferences"][key]; ok && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	return out
}

func hasUpdateEntry(obj *unstructured.Unstructured, manager string) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == ""
	})
}

// conflicts are the objects at the names of the Workspace's Deployment,
// Service and ConfigMap that are not its own, each with whose it is:
// Metacontroller cannot create the workspace's child there, and the
// Workspace turns Degraded, ChildNotCreated, without being able to say
// whose the object is (docs/workspaces.md).
func conflicts(ws *unstructured.Unstructured, objects []*unstructured.Unstructured) []string {
	names := map[string]string{"Deployment": ws.GetName(), "Service": ws.GetName(), "ConfigMap": ws.GetName() + "-config"}
	var out []string
	for _, obj := range objects {
		if names[obj.GetKind()] != obj.GetName() {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.UID == ws.GetUID() {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s: %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), live.Owner(obj)))
	}
	slices.Sort(out)
	return out
}

// hold sets formspec.dev/takeover: hold on the Workspace, unless it has it.
func hold(ctx context.Context, opts PrepareOptions, ws *unstructured.Unstructured) (bool, error) {
	if ws.GetAnnotations()[v1alpha1.AnnotationTakeover] == v1alpha1.TakeoverHold {
		return true, nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationTakeover: v1alpha1.TakeoverHold}}})
	po := metav1.PatchOptions{FieldManager: opts.Self}
	if opts.DryRun {
		po.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := opts.Dynamic.Resource(live.Workspaces).Namespace(ws.GetNamespace()).Patch(ctx, ws.GetName(), types.MergePatchType, patch, po); err != nil {
		return false, fmt.Errorf("cannot hold the Workspace: %w", err)
	}
	return true, nil
}

func resourceOf(obj *unstructured.Unstructured) (r live.ChildResource) {
	for _, cr := range live.ChildResources {
		if cr.Kind == obj.GetKind() {
			return cr
		}
	}
	return r
}

// kinds lists the children's kinds and names, for messages.
func kinds(children []Child) string {
	var parts []string
	for _, c := range children {
		parts = append(parts, c.Kind+"/"+c.Name)
	}
	return strings.Join(parts, ", ")
}

// movedManagers are the field managers moved for any child, sorted.
func movedManagers(children []Child) []string {
	set := map[string]bool{}
	for _, c := range children {
		for _, m := range c.Moved {
			set[m] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
