package trace

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/live"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
)

var (
	replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	secrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// Tracer reads the objects of a trace from the API server.
type Tracer struct {
	Dynamic dynamic.Interface
	// Metadata reads Secrets: only their metadata is ever requested, so
	// their data never reaches the plugin.
	Metadata metadata.Interface
	// MaxEvents is how many of each node's latest Events are kept.
	MaxEvents int
	// Warn is told what could not be read; the trace goes on without it.
	Warn func(string)

	// forbidden are the parts the user may not read.
	forbidden []string
}

// Workspace traces a Workspace: its ClusterClass, its children (the
// Deployment down to its pods, the Service, ConfigMap, HPA and PDB) and,
// for each spec.datastores entry, the claim serving it down to the
// Datastore's endpoint Secret.
func (t *Tracer) Workspace(ctx context.Context, obj *unstructured.Unstructured) (*Node, error) {
	var ws v1alpha1.Workspace
	if err := decode(obj, &ws); err != nil {
		// A spec the Go types refuse is the workspace's InvalidSpec, which
		// its status reports: trace the rest from what the hooks read.
		var err2 error
		ws, err2 = workspaceWithoutSpec(obj)
		if err2 != nil {
			return nil, fmt.Errorf("cannot read Workspace %s: %w", obj.GetName(), err2)
		}
	}
	root := workspaceNode(&ws)
	if name := ws.Spec.ClusterClass; name != "" {
		n, err := t.class(ctx, name)
		if err != nil {
			return nil, err
		}
		root.Children = append(root.Children, n)
	}
	children, err := live.Children(ctx, t.Dynamic, ws.Namespace, ws.UID)
	if err != nil {
		return nil, err
	}
	for _, cr := range live.ChildResources {
		for _, obj := range byName(children[ws.UID], cr.Kind) {
			n, err := t.child(ctx, obj)
			if err != nil {
				return nil, err
			}
			root.Children = append(root.Children, n)
		}
	}
	claims, err := t.datastores(ctx, &ws)
	if err != nil {
		return nil, err
	}
	root.Children = append(root.Children, claims...)
	return root, t.finish(ctx, root)
}

// ResourceClaim traces a claim: its credentials Secret, its Datastore and
// the Datastore's endpoint Secret.
func (t *Tracer) ResourceClaim(ctx context.Context, obj *unstructured.Unstructured) (*Node, error) {
	var c v1alpha1.ResourceClaim
	if err := decode(obj, &c); err != nil {
		return nil, fmt.Errorf("cannot read ResourceClaim %s: %w", obj.GetName(), err)
	}
	root, err := t.claim(ctx, &c)
	if err != nil {
		return nil, err
	}
	return root, t.finish(ctx, root)
}

// Datastore traces a Datastore and its endpoint Secret.
func (t *Tracer) Datastore(ctx context.Context, obj *unstructured.Unstructured) (*Node, error) {
	var d v1alpha1.Datastore
	if err := decode(obj, &d); err != nil {
		return nil, fmt.Errorf("cannot read Datastore %s: %w", obj.GetName(), err)
	}
	root, err := t.datastore(ctx, &d)
	if err != nil {
		return nil, err
	}
	return root, t.finish(ctx, root)
}

func (t *Tracer) class(ctx context.Context, name string) (*Node, error) {
	obj, err := t.Dynamic.Resource(live.ClusterClasses).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return t.unreadable(err, &Node{Kind: "ClusterClass", APIVersion: v1alpha1.APIVersion, Name: name},
			v1alpha1.ReasonClusterClassNotFound, fmt.Sprintf("no ClusterClass %q (kubectl get cclass)", name))
	}
	var c v1alpha1.ClusterClass
	if err := decode(obj, &c); err != nil {
		return nil, fmt.Errorf("cannot read ClusterClass %s: %w", name, err)
	}
	return classNode(&c), nil
}

// child is the node of one child of a Workspace; a Deployment's carries
// its ReplicaSets and their pods.
func (t *Tracer) child(ctx context.Context, obj *unstructured.Unstructured) (*Node, error) {
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		if err := decode(obj, &d); err != nil {
			return nil, err
		}
		n := deploymentNode(&d)
		var err error
		n.Children, err = t.replicaSets(ctx, &d)
		return n, err
	case "Service":
		return decoded(obj, serviceNode)
	case "ConfigMap":
		return decoded(obj, configMapNode)
	case "HorizontalPodAutoscaler":
		return decoded(obj, hpaNode)
	case "PodDisruptionBudget":
		return decoded(obj, pdbNode)
	}
	return nil, fmt.Errorf("unexpected child kind %s", obj.GetKind())
}

func decoded[T any](obj *unstructured.Unstructured, node func(*T) *Node) (*Node, error) {
	v := new(T)
	if err := decode(obj, v); err != nil {
		return nil, err
	}
	return node(v), nil
}

// revisionAnnotation is where the Deployment controller numbers its
// ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// replicaSets lists the Deployment's ReplicaSets, newest revision first,
// each with its pods.
func (t *Tracer) replicaSets(ctx context.Context, d *appsv1.Deployment) ([]*Node, error) {
	if d.Spec.Selector == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the selector of Deployment %s does not parse: %w", d.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: selector.String()}
	rsList, err := t.Dynamic.Resource(replicaSets).Namespace(d.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot list ReplicaSets of Deployment %s: %w", d.Name, err)
	}
	podList, err := t.Dynamic.Resource(pods).Namespace(d.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot list pods of Deployment %s: %w", d.Name, err)
	}
	podsOf := map[types.UID][]*Node{}
	for i := range podList.Items {
		var p corev1.Pod
		if err := decode(&podList.Items[i], &p); err != nil {
			return nil, err
		}
		if ref := metav1.GetControllerOfNoCopy(&p); ref != nil {
			podsOf[ref.UID] = append(podsOf[ref.UID], podNode(&p))
		}
	}
	var sets []*appsv1.ReplicaSet
	for i := range rsList.Items {
		rs := &appsv1.ReplicaSet{}
		if err := decode(&rsList.Items[i], rs); err != nil {
			return nil, err
		}
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID {
			sets = append(sets, rs)
		}
	}
	slices.SortFunc(sets, func(a, b *appsv1.ReplicaSet) int {
		ra, _ := strconv.Atoi(a.Annotations[revisionAnnotation])
		rb, _ := strconv.Atoi(b.Annotations[revisionAnnotation])
		return cmp.Or(cmp.Compare(rb, ra), b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	var out []*Node
	for _, rs := range sets {
		n := replicaSetNode(rs)
		n.Children = podsOf[rs.UID]
		slices.SortFunc(n.Children, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, n)
	}
	return out, nil
}

// datastores matches the workspace's spec.datastores with the claims of
// its namespace, as the sync hook does, and traces each claim.
func (t *Tracer) datastores(ctx context.Context, ws *v1alpha1.Workspace) ([]*Node, error) {
	if len(ws.Spec.Datastores) == 0 {
		return nil, nil
	}
	list, err := t.Dynamic.Resource(live.ResourceClaims).Namespace(ws.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list the ResourceClaims of namespace %s: %w", ws.Namespace, err)
	}
	var claims []*v1alpha1.ResourceClaim
	for i := range list.Items {
		c := &v1alpha1.ResourceClaim{}
		// The hook skips a claim that does not decode; so does the trace.
		if decode(&list.Items[i], c) == nil {
			claims = append(claims, c)
		}
	}
	var out []*Node
	for _, m := range workspace.MatchClaims(ws, claims) {
		var n *Node
		if m.Claim == nil {
			n = missing("ResourceClaim", v1alpha1.APIVersion, ws.Namespace, "", "NotFound",
				fmt.Sprintf("no ResourceClaim (rclaim) in namespace %s names workspace %s and datastore %s", ws.Namespace, ws.Name, m.Datastore.Name))
		} else if n, err = t.claim(ctx, m.Claim); err != nil {
			return nil, err
		}
		n.Datastore = m.Datastore.Name
		out = append(out, n)
	}
	return out, nil
}

// claim is a claim's node with its credentials Secret and its Datastore.
func (t *Tracer) claim(ctx context.Context, c *v1alpha1.ResourceClaim) (*Node, error) {
	n := claimNode(c)
	if b := c.Status.Binding; b != nil && b.Name != "" {
		s, err := t.secret(ctx, c.Namespace, b.Name, credentialsSecretNode,
			"NotFound", "the claim names this credentials Secret and it does not exist")
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, s)
	}
	ns := cmp.Or(c.Spec.Datastore.Namespace, c.Namespace)
	obj, err := t.Dynamic.Resource(live.Datastores).Namespace(ns).Get(ctx, c.Spec.Datastore.Name, metav1.GetOptions{})
	var d *Node
	if err != nil {
		d, err = t.unreadable(err, &Node{Kind: "Datastore", APIVersion: v1alpha1.APIVersion, Namespace: ns, Name: c.Spec.Datastore.Name},
			v1alpha1.ReasonDatastoreNotFound, fmt.Sprintf("no Datastore %s in namespace %s (kubectl -n %s get dstore)", c.Spec.Datastore.Name, ns, ns))
	} else {
		var ds v1alpha1.Datastore
		if err = decode(obj, &ds); err == nil {
			d, err = t.datastore(ctx, &ds)
		}
	}
	if err != nil {
		return nil, err
	}
	n.Children = append(n.Children, d)
	return n, nil
}

// datastore is a Datastore's node with its endpoint Secret.
func (t *Tracer) datastore(ctx context.Context, d *v1alpha1.Datastore) (*Node, error) {
	n := datastoreNode(d)
	if name := d.Spec.EndpointSecretRef.Name; name != "" {
		s, err := t.secret(ctx, d.Namespace, name, func(m *metav1.ObjectMeta) *Node { return endpointSecretNode(m, d.Name) },
			v1alpha1.ReasonSecretNotFound, "the Datastore's endpoint Secret does not exist")
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, s)
	}
	return n, nil
}

// secret reads a Secret's metadata, never its data, for node.
func (t *Tracer) secret(ctx context.Context, namespace, name string, node func(*metav1.ObjectMeta) *Node, notFoundReason, notFound string) (*Node, error) {
	m, err := t.Metadata.Resource(secrets).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return t.unreadable(err, &Node{Kind: "Secret", APIVersion: "v1", Namespace: namespace, Name: name}, notFoundReason, notFound)
	}
	return node(&m.ObjectMeta), nil
}

// unreadable turns a failed read into n: a missing object (reason and
// message say what that means), or one the user may not read. A user
// with a namespace's view rights reads neither ClusterClasses nor
// Secrets; such a part has no ready state, so that it does not fail the
// trace: its parent's status already reports what it would (a missing
// class, an endpoint Secret without consent). Any other failure stops the
// trace.
func (t *Tracer) unreadable(err error, n *Node, notFoundReason, notFound string) (*Node, error) {
	switch {
	case apierrors.IsNotFound(err):
		return n.set(ReadyFalse, notFoundReason, notFound), nil
	case apierrors.IsForbidden(err):
		t.forbidden = append(t.forbidden, n.Ref())
		return n.set("", "Forbidden", err.Error()), nil
	}
	return nil, fmt.Errorf("cannot read %s %s/%s: %w", n.Kind, n.Namespace, n.Name, err)
}

// finish completes a tree: every node's Events, and a warning naming the
// parts that could not be read.
func (t *Tracer) finish(ctx context.Context, root *Node) error {
	if len(t.forbidden) > 0 {
		t.Warn(fmt.Sprintf("not allowed to read %s: the trace shows them without a state", strings.Join(t.forbidden, ", ")))
	}
	return t.events(ctx, root)
}

// decode converts an object read through the dynamic client to its Go
// type.
func decode(obj *unstructured.Unstructured, out any) error {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// workspaceWithoutSpec reads a Workspace whose spec does not decode: its
// metadata and status, and of its spec what the customize hook reads.
func workspaceWithoutSpec(obj *unstructured.Unstructured) (v1alpha1.Workspace, error) {
	var ws v1alpha1.Workspace
	rest := obj.DeepCopy()
	spec, _ := rest.Object["spec"].(map[string]any)
	delete(rest.Object, "spec")
	if err := decode(rest, &ws); err != nil {
		return ws, err
	}
	ws.Spec.ClusterClass, _ = spec["clusterClass"].(string)
	var part struct {
		Datastores []v1alpha1.DatastoreRef `json:"datastores"`
	}
	if decode(&unstructured.Unstructured{Object: spec}, &part) == nil {
		ws.Spec.Datastores = part.Datastores
	}
	return ws, nil
}

// byName returns the objects of one kind, sorted by name.
func byName(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}
