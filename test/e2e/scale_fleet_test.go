package e2e

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// The fleet TestScale creates: N Workspaces in namespaces of
// wsPerNamespace, in the classes of scaleClasses by groups of ten, every
// tenth with a claim on its namespace's Datastore, and a Node per
// wsPerNode workspaces (at least three). Once every workspace has
// converged, the test plays the Deployment controller and the kubelet: it
// writes each Deployment's status as rolled out and creates one pod per
// workspace, bound to a node.
const (
	wsPerNamespace = 100
	wsPerNode      = 100
	claimEvery     = 10
	// scaleNamespacePrefix starts every namespace of the fleet.
	scaleNamespacePrefix = "scale-"
	scaleDatastore       = "db"
	scaleFieldManager    = "formspec-scale-test"
)

// scaleClass is one ClusterClass of the fleet and the share of the
// workspaces in it, in tenths.
type scaleClass struct {
	class  *v1alpha1.ClusterClass
	tenths int
	// extra is the child the hooks add for the class beyond the
	// Deployment, Service and ConfigMap: "PodDisruptionBudget",
	// "HorizontalPodAutoscaler" or none.
	extra string
}

// scaleClasses are the fleet's classes: most workspaces are one replica on
// general nodes, some on high-memory nodes, a tenth have two replicas
// (spread, with a PodDisruptionBudget) and a tenth auto-scale.
func scaleClasses() []scaleClass {
	class := func(name, nodeType string, s v1alpha1.Scaling, features ...string) *v1alpha1.ClusterClass {
		c := clusterClass(name, s, features...)
		c.Spec.NodeType = nodeType
		return c
	}
	return []scaleClass{
		{class: class("scale-standard", "general", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)}), tenths: 6},
		{class: class("scale-large", "highmem", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}), tenths: 2},
		{class: class("scale-ha", "general", v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4)}), tenths: 1, extra: "PodDisruptionBudget"},
		{class: class("scale-auto", "general", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5)}, "auto-scaling"), tenths: 1, extra: "HorizontalPodAutoscaler"},
	}
}

// fleet names the objects of a fleet of n workspaces.
type fleet struct {
	n       int
	classes []scaleClass
	// byTenth maps i/10 % 10 to the class of workspace i.
	byTenth [10]int
}

func newFleet(n int) *fleet {
	f := &fleet{n: n, classes: scaleClasses()}
	k := 0
	for ci, c := range f.classes {
		for range c.tenths {
			f.byTenth[k] = ci
			k++
		}
	}
	return f
}

func (f *fleet) namespaces() int { return (f.n + wsPerNamespace - 1) / wsPerNamespace }
func (f *fleet) nodes() int      { return max(3, f.n/wsPerNode) }

func (f *fleet) namespace(i int) string {
	return fmt.Sprintf("%s%03d", scaleNamespacePrefix, i/wsPerNamespace)
}

func (f *fleet) name(i int) string      { return fmt.Sprintf("ws-%05d", i) }
func (f *fleet) class(i int) scaleClass { return f.classes[f.byTenth[(i/10)%10]] }
func (f *fleet) hasClaim(i int) bool    { return i%claimEvery == 0 }
func (f *fleet) nodeName(k int) string  { return fmt.Sprintf("scale-node-%03d", k) }
func (f *fleet) key(i int) string       { return f.namespace(i) + "/" + f.name(i) }
func (f *fleet) claimName(i int) string { return f.name(i) + "-db" }
func (f *fleet) nodeType(k int) string {
	return map[bool]string{true: "highmem", false: "general"}[k%5 == 0]
}
func (f *fleet) podName(i int) string { return f.name(i) + "-0" }
func (f *fleet) nodeOf(i int) string  { return f.nodeName(i % f.nodes()) }
func (f *fleet) claims() int          { return (f.n + claimEvery - 1) / claimEvery }
func (f *fleet) expectedExtra() (pdb, hpa int) {
	for i := range f.n {
		switch f.class(i).extra {
		case "PodDisruptionBudget":
			pdb++
		case "HorizontalPodAutoscaler":
			hpa++
		}
	}
	return pdb, hpa
}

// workspace is workspace i as a user would write it.
func (f *fleet) workspace(i int) *v1alpha1.Workspace {
	ws := newWorkspace(f.namespace(i), f.name(i), f.class(i).class.Name)
	ws.Spec.Config = map[string]string{"LOG_LEVEL": "info", "FEATURE_FLAGS": "search,export", "TENANT": f.name(i)}
	if f.hasClaim(i) {
		ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: scaleDatastore, EnvPrefix: "DB_"}}
	}
	return ws
}

// datastore and endpoint are namespace ns's Datastore and its labelled
// Secret, serving every workspace of the namespace, owned by
// claimstest.Owner.
func (f *fleet) datastore(ns string) (*v1alpha1.Datastore, *corev1.Secret) {
	ds := claimstest.Datastore()
	ds.ObjectMeta = metav1.ObjectMeta{Name: scaleDatastore, Namespace: ns}
	ds.Spec.EndpointSecretRef.Name = scaleDatastore + "-endpoint"
	ds.Spec.AllowedTenants = []string{ns + "/*"}
	ds.Spec.OwnerPublicKeys = nil
	sec := claimstest.Secret()
	sec.ObjectMeta = metav1.ObjectMeta{Name: ds.Spec.EndpointSecretRef.Name, Namespace: ns,
		Labels: map[string]string{v1alpha1.LabelDatastore: scaleDatastore}}
	return ds, sec
}

// claim is workspace i's signed grant, made a minute ago by the real
// clock, which is what the hook checks against.
func (f *fleet) claim(i int, grantedAt time.Time) *v1alpha1.ResourceClaim {
	c := claimstest.Claim()
	c.ObjectMeta = metav1.ObjectMeta{Name: f.claimName(i), Namespace: f.namespace(i)}
	c.Spec.Datastore = v1alpha1.DatastoreClaimRef{Name: scaleDatastore}
	c.Spec.Workspace = f.name(i)
	c.Spec.GrantedAt = grantedAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	return claimstest.SignClaim(c, claimstest.Owner)
}

// node is node k, Ready, with the labels the classes select.
func (f *fleet) node(k int) *corev1.Node {
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: f.nodeName(k), Labels: map[string]string{
			v1alpha1.LabelNodeType: f.nodeType(k), "kubernetes.io/hostname": f.nodeName(k),
		}},
	}
}

func nodeStatus(name string, since time.Time) map[string]any {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return map[string]any{
		"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name},
		"status": map[string]any{
			"capacity": res, "allocatable": res,
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady",
				"message": "kubelet is posting ready status", "lastHeartbeatTime": since.UTC().Format(time.RFC3339),
				"lastTransitionTime": since.UTC().Format(time.RFC3339)}},
		},
	}
}

// pod is workspace i's one pod, bound to its node, as the kubelet would
// have it once started (status is left to the API server's default,
// Pending, which is live for the reporter).
func (f *fleet) pod(i int) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: f.podName(i), Namespace: f.namespace(i),
			Labels: map[string]string{v1alpha1.LabelWorkspace: f.name(i)}},
		Spec: corev1.PodSpec{
			NodeName:                     f.nodeOf(i),
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "resource", Image: "formahub/formspec-resource:1.8.2"}},
		},
	}
}

// writer makes the test's own writes through client-go, concurrently,
// and counts them the way the API server's apiserver_request_total labels
// them, so that they can be told from the writes of Metacontroller and
// the reporter.
type writer struct {
	dyn dynamic.Interface
	mu  sync.Mutex
	// count is by apiKey.
	count map[apiKey]float64
}

var (
	gvrNamespaces    = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrSecrets       = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrNodes         = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	gvrPods          = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrServices      = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrConfigMaps    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrDeployments   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrHPAs          = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	gvrPDBs          = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	gvrWorkspaces    = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "workspaces"}
	gvrClusterClass  = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "clusterclasses"}
	gvrDatastores    = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "datastores"}
	gvrResourceClaim = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "resourceclaims"}
)

// create creates obj (a typed object with TypeMeta set) as a POST.
func (w *writer) create(ctx context.Context, gvr schema.GroupVersionResource, obj any) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	us := &unstructured.Unstructured{Object: u}
	unstructured.RemoveNestedField(us.Object, "metadata", "creationTimestamp")
	var rc dynamic.ResourceInterface = w.dyn.Resource(gvr)
	if ns := us.GetNamespace(); ns != "" {
		rc = w.dyn.Resource(gvr).Namespace(ns)
	}
	_, err = rc.Create(ctx, us, metav1.CreateOptions{FieldManager: scaleFieldManager})
	w.counted("POST", gvr.Resource, "")
	if err != nil {
		return fmt.Errorf("cannot create %s %s/%s: %w", gvr.Resource, us.GetNamespace(), us.GetName(), err)
	}
	return nil
}

// applyStatus server-side applies obj's status through the status
// subresource.
func (w *writer) applyStatus(ctx context.Context, gvr schema.GroupVersionResource, obj map[string]any) error {
	us := &unstructured.Unstructured{Object: obj}
	var rc dynamic.ResourceInterface = w.dyn.Resource(gvr)
	if ns := us.GetNamespace(); ns != "" {
		rc = w.dyn.Resource(gvr).Namespace(ns)
	}
	_, err := rc.ApplyStatus(ctx, us.GetName(), us, metav1.ApplyOptions{FieldManager: scaleFieldManager, Force: true})
	w.counted("APPLY", gvr.Resource, "status")
	if err != nil {
		return fmt.Errorf("cannot write the status of %s %s/%s: %w", gvr.Resource, us.GetNamespace(), us.GetName(), err)
	}
	return nil
}

// mergePatch merge-patches an object and returns its new generation.
func (w *writer) mergePatch(ctx context.Context, gvr schema.GroupVersionResource, key types.NamespacedName, patch []byte) (int64, error) {
	got, err := w.dyn.Resource(gvr).Namespace(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: scaleFieldManager})
	w.counted("PATCH", gvr.Resource, "")
	if err != nil {
		return 0, fmt.Errorf("cannot patch %s %s: %w", gvr.Resource, key, err)
	}
	return got.GetGeneration(), nil
}

func (w *writer) counted(verb, res, sub string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count[apiKey{verb: verb, resource: res, subresource: sub}]++
}

func (w *writer) writes() map[apiKey]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.count)
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
