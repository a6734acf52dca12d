// Package diff previews, for `kubectl formspec diff`, what this version of
// the workspace hooks would change in the live children of each Workspace.
// For every Workspace it builds, from the live objects, the request
// Metacontroller would send (the children it claims, the related objects
// the customize hook asks for), runs the sync hook in process, and has the
// API server dry-run Metacontroller's server-side apply of every desired
// child, comparing the result with the live child the way Metacontroller
// does before it applies.
package diff

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/live"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/render"
)

// Outcomes of a workspace.
const (
	// Unchanged: applying the hook's answer would change nothing.
	Unchanged = "unchanged"
	// Changed: some child would change, create or go, and no pod would
	// roll.
	Changed = "changed"
	// PodsWouldRoll: the Deployment's pod template would change, so the
	// Deployment would replace every pod.
	PodsWouldRoll = "pods would roll"
	// Terminating: the Workspace is being deleted; its finalize hook, not
	// sync, decides what happens, and it is not compared.
	Terminating = "terminating"
	// Failed: the workspace could not be compared; Result.Error says why.
	Failed = "error"
)

// Child actions.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
	// InTheWay: an object of the child's kind and name that is not the
	// workspace's child exists, and Metacontroller's apply onto it would
	// fail: the child is not created and the Workspace turns Degraded,
	// ChildNotCreated. Child.Owner says whose it is, Child.Error why the
	// apply fails.
	InTheWay = "in the way"
	// TakeOver: such an object exists and the apply would succeed,
	// overwriting it and making it the workspace's child.
	TakeOver = "take over"
)

// Options configure a diff.
type Options struct {
	// Hooks is the hook server's configuration, which must match the
	// installed server's flags.
	Hooks workspace.Config
	// FieldManager is Metacontroller's server-side apply field manager.
	FieldManager string
	Dynamic      dynamic.Interface
	// Metadata reads the credentials Secrets' metadata, to give granted
	// claims the credentialsHash this version's resourceclaim hook would
	// (claimHashes); nil takes the claims' statuses as they are.
	Metadata metadata.Interface
	// Mapper resolves the related resources the customize hook asks for.
	Mapper meta.RESTMapper
	// Workers is how many workspaces are compared at once.
	Workers int
}

// Result is what would happen to one Workspace.
type Result struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Outcome   string  `json:"outcome"`
	Children  []Child `json:"children,omitempty"`
	// Held: the Workspace carries formspec.dev/takeover: hold, and the
	// children are what would happen once it is released (kubectl
	// formspec takeover roll); until then nothing changes.
	Held bool `json:"held,omitempty"`
	// Degraded is the reason and message of the Degraded condition the
	// hook would write, when it would write one.
	Degraded string `json:"degraded,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Child is one child an apply would change.
type Child struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action string `json:"action"`
	// Fields are the fields an update changes.
	Fields []Field `json:"fields,omitempty"`
	// Owner, for InTheWay and TakeOver, says whose the object at the
	// child's name is.
	Owner string `json:"owner,omitempty"`
	// Error, for InTheWay, is the API server's refusal of the apply.
	Error string `json:"error,omitempty"`
}

// Run compares every Workspace in namespace ("" for all namespaces),
// sorted by namespace and name. An error is one that stops the whole
// diff; a workspace that cannot be compared is a Result with outcome
// Failed.
func Run(ctx context.Context, opts Options, namespace string) ([]Result, error) {
	list, err := opts.Dynamic.Resource(live.Workspaces).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list Workspaces: %w", err)
	}
	children, err := live.Children(ctx, opts.Dynamic, namespace, "")
	if err != nil {
		return nil, err
	}
	d := &differ{opts: opts, related: newRelatedCache(opts.Dynamic, opts.Mapper), hashes: newClaimHashes(opts.Metadata)}
	results := make([]Result, len(list.Items))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(opts.Workers, 1))
	for i := range list.Items {
		g.Go(func() error {
			ws := &list.Items[i]
			results[i] = d.workspace(ctx, ws, children[ws.GetUID()])
			return ctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(results, func(a, b Result) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return results, nil
}

type differ struct {
	opts    Options
	related *relatedCache
	hashes  *claimHashes
}

// workspace compares one Workspace.
func (d *differ) workspace(ctx context.Context, ws *unstructured.Unstructured, observed []*unstructured.Unstructured) Result {
	res := Result{Namespace: ws.GetNamespace(), Name: ws.GetName()}
	if ws.GetDeletionTimestamp() != nil {
		res.Outcome = Terminating
		return res
	}
	if ws.GetAnnotations()[v1alpha1.AnnotationTakeover] == v1alpha1.TakeoverHold {
		// What a held workspace becomes is the question before its
		// release: answer it as if released (docs/migrating.md).
		ws = ws.DeepCopy()
		annotations := ws.GetAnnotations()
		delete(annotations, v1alpha1.AnnotationTakeover)
		ws.SetAnnotations(annotations)
		res.Held = true
	}
	children, degraded, err := d.compare(ctx, ws, observed)
	if err != nil {
		res.Outcome, res.Error = Failed, err.Error()
		return res
	}
	res.Children, res.Outcome, res.Degraded = children, Unchanged, degraded
	for _, c := range children {
		res.Outcome = Changed
		if c.Kind == "Deployment" && c.Action == Update && rolls(c.Fields) {
			res.Outcome = PodsWouldRoll
			break
		}
	}
	return res
}

// rolls reports whether a Deployment update changes its pod template.
func rolls(fields []Field) bool {
	return slices.ContainsFunc(fields, func(f Field) bool {
		return f.Path == "spec.template" || strings.HasPrefix(f.Path, "spec.template.")
	})
}

// compare asks the hook for the workspace's children and compares each
// with what is live; it also returns the Degraded reason and message the
// hook would write, if any.
func (d *differ) compare(ctx context.Context, ws *unstructured.Unstructured, observed []*unstructured.Unstructured) ([]Child, string, error) {
	desired, degraded, err := d.desired(ctx, ws, observed)
	if err != nil {
		return nil, "", err
	}
	liveByKey := map[string]*unstructured.Unstructured{}
	for _, o := range observed {
		liveByKey[childKey(o)] = o
	}
	var out []Child
	for _, obj := range desired {
		k := childKey(obj)
		current := liveByKey[k]
		delete(liveByKey, k)
		if current != nil && current.GetDeletionTimestamp() != nil {
			// Metacontroller waits for a child being deleted to go.
			continue
		}
		if current == nil {
			c, err := d.create(ctx, ws, obj)
			if err != nil {
				return nil, "", err
			}
			out = append(out, c)
			continue
		}
		applied, err := d.dryRunApply(ctx, ws, obj)
		if err != nil {
			return nil, "", err
		}
		switch {
		default:
			if fields := Fields(sanitize(current).Object, sanitize(applied).Object); len(fields) > 0 {
				out = append(out, Child{Kind: obj.GetKind(), Name: obj.GetName(), Action: Update, Fields: fields})
			}
		}
	}
	// Metacontroller deletes the observed children the hook no longer
	// asks for, except those already being deleted.
	for _, o := range liveByKey {
		if o.GetDeletionTimestamp() == nil {
			out = append(out, Child{Kind: o.GetKind(), Name: o.GetName(), Action: Delete})
		}
	}
	slices.SortFunc(out, func(a, b Child) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(a.Name, b.Name))
	})
	return out, degraded, nil
}

// desired builds the request Metacontroller would send for ws and returns
// the children the sync hook answers, and the reason and message of the
// Degraded condition it answers when that is True.
func (d *differ) desired(ctx context.Context, ws *unstructured.Unstructured, observed []*unstructured.Unstructured) ([]*unstructured.Unstructured, string, error) {
	parent, err := json.Marshal(ws.Object)
	if err != nil {
		return nil, "", err
	}
	hooks := workspace.New(d.opts.Hooks)
	custom, err := hooks.Customize(ctx, &metacontroller.CustomizeRequest{Parent: parent})
	if err != nil {
		return nil, "", fmt.Errorf("customize hook: %w", err)
	}
	related, err := d.related.objects(ctx, custom.RelatedResources)
	if err != nil {
		return nil, "", err
	}
	if err := d.hashes.apply(ctx, related); err != nil {
		return nil, "", err
	}
	children := metacontroller.ObjectMap{}
	// Metacontroller sends every declared child kind, empty or not.
	for _, cr := range live.ChildResources {
		children[metacontroller.Key(cr.APIVersion(), cr.Kind)] = map[string]json.RawMessage{}
	}
	for _, o := range observed {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, "", err
		}
		children[metacontroller.Key(o.GetAPIVersion(), o.GetKind())][metacontroller.Name(o.GetNamespace(), o.GetName())] = raw
	}
	resp, err := render.Sync(ctx, d.opts.Hooks, &metacontroller.CompositeRequest{Parent: parent, Children: children, Related: related})
	if err != nil {
		return nil, "", fmt.Errorf("sync hook: %w", err)
	}
	out := make([]*unstructured.Unstructured, 0, len(resp.Children))
	for _, c := range resp.Children {
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, "", err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, "", fmt.Errorf("sync hook answered a child that is not an object: %w", err)
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(ws.GetNamespace())
		}
		out = append(out, obj)
	}
	var degraded string
	if st, ok := resp.Status.(*v1alpha1.WorkspaceStatus); ok {
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			degraded = c.Reason + ": " + c.Message
		}
	}
	return out, degraded, nil
}

// create is what Metacontroller's apply of a child it does not observe
// would do. Usually it creates it; but an object of that kind and name
// that is not the workspace's child may be in the way, which the hooks
// cannot see (docs/workspaces.md), and this tells whose it is and what the
// apply would do to it: fail (Metacontroller retries, the Workspace turns
// Degraded, ChildNotCreated), or succeed, overwriting and adopting it.
func (d *differ) create(ctx context.Context, ws, obj *unstructured.Unstructured) (Child, error) {
	c := Child{Kind: obj.GetKind(), Name: obj.GetName(), Action: Create}
	cr, ok := childResource(obj)
	if !ok {
		return c, fmt.Errorf("the sync hook answered a %s %s, which the workspace controller does not declare", obj.GetAPIVersion(), obj.GetKind())
	}
	other, err := d.opts.Dynamic.Resource(cr.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := d.dryRunApply(ctx, ws, obj)
		return c, err
	case err != nil:
		return c, fmt.Errorf("cannot read %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	c.Owner = live.Owner(other)
	if _, err := d.dryRunApply(ctx, ws, obj); err != nil {
		c.Action, c.Error = InTheWay, err.Error()
		return c, nil
	}
	c.Action = TakeOver
	return c, nil
}

// dryRunApply applies obj as Metacontroller would, labelled and owned as
// its child of parent, under its field manager, with force, as a dry run,
// and returns what the API server would store.
func (d *differ) dryRunApply(ctx context.Context, parent, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cr, ok := childResource(obj)
	if !ok {
		return nil, fmt.Errorf("the sync hook answered a %s %s, which the workspace controller does not declare", obj.GetAPIVersion(), obj.GetKind())
	}
	claim(parent, obj)
	data, err := json.Marshal(sanitize(obj).Object)
	if err != nil {
		return nil, err
	}
	force := true
	applied, err := d.opts.Dynamic.Resource(cr.Resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: d.opts.FieldManager, Force: &force, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("dry-run apply of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return applied, nil
}

// claim labels and owns obj as Metacontroller does with the desired
// children of parent: the controller-uid label of its generated selector
// and a controller owner reference.
func claim(parent, obj *unstructured.Unstructured) {
	labels := obj.GetLabels()
	if _, ok := labels[live.ControllerUIDLabel]; !ok {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[live.ControllerUIDLabel] = string(parent.GetUID())
		obj.SetLabels(labels)
	}
	refs := obj.GetOwnerReferences()
	for _, r := range refs {
		if r.UID == parent.GetUID() {
			return
		}
	}
	yes := true
	obj.SetOwnerReferences(append(refs, metav1.OwnerReference{
		APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(), UID: parent.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes,
	}))
}

// lastAppliedAnnotation is where Metacontroller's default apply keeps the
// object it last applied; its server-side apply drops it.
const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// sanitize drops what Metacontroller leaves out when it compares an
// object before and after a server-side apply: the read-only metadata the
// API server fills in, the status, and its own last-applied annotation.
func sanitize(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	for _, f := range []string{"selfLink", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	if a := c.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			c.SetAnnotations(a)
		}
	}
	return c
}

func childKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func childResource(obj *unstructured.Unstructured) (live.ChildResource, bool) {
	for _, cr := range live.ChildResources {
		if cr.Kind == obj.GetKind() && cr.APIVersion() == obj.GetAPIVersion() {
			return cr, true
		}
	}
	return live.ChildResource{}, false
}

// kindOrder sorts children as the controller declares them.
func kindOrder(kind string) int {
	return slices.IndexFunc(live.ChildResources, func(cr live.ChildResource) bool { return cr.Kind == kind })
}
