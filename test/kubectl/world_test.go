package kubectl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/render"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// This file plays, for the objects of the tests, the controllers of a real
// cluster: Metacontroller calling this repository's hooks and applying
// their answers, and the Deployment, ReplicaSet, HPA and disruption
// controllers and the kubelet writing what they would write. The control
// plane runs none of them, so every object has exactly the status a test
// gives it.

// metacontrollerManager is Metacontroller's server-side apply field
// manager, which kubectl formspec diff applies as by default.
const metacontrollerManager = "metacontroller"

// controllerManager writes the statuses the controllers of a cluster
// would.
const controllerManager = "kube-controller-manager"

// hookConfig is the hook server's configuration the world is synced with;
// diff must be given the same to find nothing changed.
var hookConfig = workspace.Config{ResourceImage: "formahub/formspec-resource", DefaultVersion: "1.4.0", ControlClusterURL: "http://formspec-ctl.formspec-system:7070",
	// The world relates claims as Metacontroller would: no reporter writes
	// summaries here.
	Claims: workspace.ClaimsRelated}

// hookFlags are hookConfig as the command-line flags of the hook server.
var hookFlags = []string{"--resource-image", hookConfig.ResourceImage, "--default-version", hookConfig.DefaultVersion, "--cluster-control-url", hookConfig.ControlClusterURL,
	"--workspace-claims", string(hookConfig.Claims)}

// childKinds are the workspace controller's child kinds.
var childKinds = [][2]string{
	{"apps/v1", "Deployment"}, {"v1", "Service"}, {"v1", "ConfigMap"},
	{"autoscaling/v2", "HorizontalPodAutoscaler"}, {"policy/v1", "PodDisruptionBudget"},
}

// world creates and changes the objects of the tests.
type world struct {
	t *testing.T
	c *controlplane.Client
}

// object converts a typed object (or a map) to what the client sends.
func object(v any) controlplane.Object {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var obj controlplane.Object
	if err := json.Unmarshal(raw, &obj); err != nil {
		panic(err)
	}
	return obj
}

// as decodes an object into a typed value.
func as[T any](t testing.TB, obj controlplane.Object) *T {
	t.Helper()
	out := new(T)
	raw, _ := json.Marshal(obj)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (w *world) create(v any) controlplane.Object {
	w.t.Helper()
	got, err := w.c.Create(object(v))
	if err != nil {
		w.t.Fatalf("create: %v", err)
	}
	return got
}

func (w *world) apply(v any, manager string) controlplane.Object {
	w.t.Helper()
	got, err := w.c.Apply(object(v), manager)
	if err != nil {
		w.t.Fatalf("apply: %v", err)
	}
	return got
}

// applyStatus writes a status as the controller owning it would.
func (w *world) applyStatus(apiVersion, kind, namespace, name string, status any) {
	w.t.Helper()
	_, err := w.c.ApplyStatus(controlplane.Object{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"status":   object(status),
	}, controllerManager)
	if err != nil {
		w.t.Fatalf("status of %s %s/%s: %v", kind, namespace, name, err)
	}
}

func (w *world) get(apiVersion, kind, namespace, name string) controlplane.Object {
	w.t.Helper()
	obj, err := w.c.Get(apiVersion, kind, namespace, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return obj
}

// list returns the objects of a kind in namespace matching selector, with
// their apiVersion and kind set (the API server leaves them out of list
// items).
func (w *world) list(apiVersion, kind, namespace, selector string) []controlplane.Object {
	w.t.Helper()
	path, err := w.c.ResourcePath(apiVersion, kind, namespace, "")
	if err != nil {
		w.t.Fatal(err)
	}
	if selector != "" {
		path += "?labelSelector=" + url.QueryEscape(selector)
	}
	raw, err := w.c.Do(http.MethodGet, path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	var list struct {
		Items []controlplane.Object `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		w.t.Fatal(err)
	}
	for _, o := range list.Items {
		o["apiVersion"], o["kind"] = apiVersion, kind
	}
	return list.Items
}

// putStatus replaces an object's status through its status subresource,
// as Metacontroller writes a parent's or a decorated object's status.
func (w *world) putStatus(obj controlplane.Object, status any) {
	w.t.Helper()
	apiVersion, kind := obj["apiVersion"].(string), obj["kind"].(string)
	meta := obj["metadata"].(map[string]any)
	ns, name := meta["namespace"].(string), meta["name"].(string)
	current := w.get(apiVersion, kind, ns, name)
	current["status"] = object(status)
	path, err := w.c.ResourcePath(apiVersion, kind, ns, name)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.c.Do(http.MethodPut, path+"/status", current); err != nil {
		w.t.Fatalf("status of %s %s/%s: %v", kind, ns, name, err)
	}
}

// raw encodes an object for a hook request.
func raw(obj controlplane.Object) json.RawMessage {
	out, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return out
}

func metaOf(obj controlplane.Object) (namespace, name, uid string) {
	m := obj["metadata"].(map[string]any)
	ns, _ := m["namespace"].(string)
	return ns, m["name"].(string), m["uid"].(string)
}

// sync does for one Workspace what Metacontroller does on a sync: it sends
// the sync hook the Workspace, the children it owns and its related
// objects (its ClusterClass, the claims of its namespace), applies the
// children the hook answers under Metacontroller's field manager, labelled
// and owned as Metacontroller labels and owns them, deletes the owned
// children it no longer asks for, and writes the status. edit, when set,
// changes the request before it is sent.
func (w *world) sync(namespace, name string, edit func(*metacontroller.CompositeRequest)) {
	w.t.Helper()
	ws := w.get(v1alpha1.APIVersion, "Workspace", namespace, name)
	_, _, uid := metaOf(ws)
	children := metacontroller.ObjectMap{}
	observed := map[string]controlplane.Object{}
	for _, k := range childKinds {
		key := metacontroller.Key(k[0], k[1])
		children[key] = map[string]json.RawMessage{}
		for _, o := range w.list(k[0], k[1], namespace, "controller-uid="+uid) {
			ns, n, _ := metaOf(o)
			children[key][metacontroller.Name(ns, n)] = raw(o)
			observed[key+" "+n] = o
		}
	}
	related := metacontroller.ObjectMap{metacontroller.Key(v1alpha1.APIVersion, "ClusterClass"): {}, metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim"): {}}
	spec := ws["spec"].(map[string]any)
	if class, err := w.c.Get(v1alpha1.APIVersion, "ClusterClass", "", spec["clusterClass"].(string)); err == nil {
		related[metacontroller.Key(v1alpha1.APIVersion, "ClusterClass")][spec["clusterClass"].(string)] = raw(class)
	} else if !controlplane.IsNotFound(err) {
		w.t.Fatal(err)
	}
	for _, c := range w.list(v1alpha1.APIVersion, "ResourceClaim", namespace, "") {
		_, n, _ := metaOf(c)
		related[metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim")][metacontroller.Name(namespace, n)] = raw(c)
	}
	req := &metacontroller.CompositeRequest{Parent: raw(ws), Children: children, Related: related}
	if edit != nil {
		edit(req)
	}
	resp, err := hook(req)
	if err != nil {
		w.t.Fatalf("sync of Workspace %s/%s: %v", namespace, name, err)
	}
	yes := true
	owner := metav1.OwnerReference{APIVersion: v1alpha1.APIVersion, Kind: "Workspace", Name: name, UID: types.UID(uid), Controller: &yes, BlockOwnerDeletion: &yes}
	for _, c := range resp.Children {
		child := object(c)
		meta := child["metadata"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		labels["controller-uid"] = uid
		meta["labels"] = labels
		meta["ownerReferences"] = []any{object(owner)}
		w.apply(child, metacontrollerManager)
		delete(observed, metacontroller.Key(child["apiVersion"].(string), child["kind"].(string))+" "+meta["name"].(string))
	}
	for _, o := range observed {
		ns, n, _ := metaOf(o)
		if err := w.c.DeleteWithPropagation(o["apiVersion"].(string), o["kind"].(string), ns, n, "Background"); err != nil {
			w.t.Fatal(err)
		}
	}
	w.putStatus(ws, resp.Status)
}

// hook calls the sync hook, or the finalize hook for a Workspace being
// deleted, as Metacontroller does.
func hook(req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	var parent struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(req.Parent, &parent); err != nil {
		return nil, err
	}
	if parent.Metadata.DeletionTimestamp == nil {
		return render.Sync(context.Background(), hookConfig, req)
	}
	req.Finalizing = true
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var wreq workspace.Request
	if err := wreq.Decode(body); err != nil {
		return nil, err
	}
	return workspace.New(hookConfig).Finalize(context.Background(), &wreq)
}

// decorate does for one object what Metacontroller does on a
// DecoratorController sync: it sends the hook the object with its related
// objects, applies the attachments it answers, owned by the object, and
// writes the status.
func (w *world) decorate(obj controlplane.Object, related metacontroller.ObjectMap, hook func(context.Context, *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error)) {
	w.t.Helper()
	ns, name, uid := metaOf(obj)
	resp, err := hook(context.Background(), &metacontroller.DecoratorRequest{Object: raw(obj), Attachments: metacontroller.ObjectMap{}, Related: related})
	if err != nil {
		w.t.Fatalf("sync of %s %s/%s: %v", obj["kind"], ns, name, err)
	}
	yes := true
	owner := metav1.OwnerReference{APIVersion: obj["apiVersion"].(string), Kind: obj["kind"].(string), Name: name, UID: types.UID(uid), Controller: &yes, BlockOwnerDeletion: &yes}
	for _, a := range resp.Attachments {
		a["metadata"].(map[string]any)["ownerReferences"] = []any{object(owner)}
		w.apply(a, metacontrollerManager)
	}
	w.putStatus(obj, resp.Status)
}

// runDeployment plays the Deployment controller and the kubelet for a
// Deployment whose rollout went well: a ReplicaSet (revision 2) of its pod
// template with every replica ready, each pod Running and Ready, and the
// status that says so. It returns the ReplicaSet.
func (w *world) runDeployment(namespace, name string) *appsv1.ReplicaSet {
	w.t.Helper()
	dep := as[appsv1.Deployment](w.t, w.get("apps/v1", "Deployment", namespace, name))
	want := *dep.Spec.Replicas
	rs := w.replicaSet(dep, currentHash, 2, want, want)
	for i := range want {
		w.pod(rs, podName(rs, i), readyPod())
	}
	w.applyStatus("apps/v1", "Deployment", namespace, name, appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: want, UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want,
		Conditions: []appsv1.DeploymentCondition{
			deploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."),
			deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name)),
		},
	})
	return rs
}

// currentHash is the pod-template-hash of every current ReplicaSet.
const currentHash = "7d4b9c"

// podName is the name of the ReplicaSet's i-th pod.
func podName(rs *appsv1.ReplicaSet, i int32) string {
	return fmt.Sprintf("%s-%c%s", rs.Name, 'a'+i, "x2k9")
}

func deploymentCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, message string) appsv1.DeploymentCondition {
	now := metav1.Now()
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: message, LastUpdateTime: now, LastTransitionTime: now}
}

// replicaSet creates the ReplicaSet of the Deployment's pod template, as
// the Deployment controller would, with ready of its replicas ready and
// the given conditions.
func (w *world) replicaSet(dep *appsv1.Deployment, hash string, revision int, replicas, ready int32, conds ...appsv1.ReplicaSetCondition) *appsv1.ReplicaSet {
	w.t.Helper()
	tmpl := dep.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels["pod-template-hash"] = hash
	selector := dep.Spec.Selector.DeepCopy()
	selector.MatchLabels["pod-template-hash"] = hash
	yes := true
	rs := &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: dep.Name + "-" + hash, Namespace: dep.Namespace, Labels: tmpl.Labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(revision)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: selector, Template: *tmpl},
	}
	rs = as[appsv1.ReplicaSet](w.t, w.create(rs))
	w.applyStatus("apps/v1", "ReplicaSet", rs.Namespace, rs.Name, appsv1.ReplicaSetStatus{
		Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready, ObservedGeneration: rs.Generation, Conditions: conds,
	})
	rs.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}
	return rs
}

// pod creates a pod of the ReplicaSet on a node and gives it status, as
// the scheduler and the kubelet would.
func (w *world) pod(rs *appsv1.ReplicaSet, name string, status corev1.PodStatus) {
	w.t.Helper()
	yes := true
	spec := rs.Spec.Template.Spec.DeepCopy()
	spec.NodeName = "node-1"
	w.create(&corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: rs.Namespace, Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: *spec,
	})
	w.applyStatus("v1", "Pod", rs.Namespace, name, status)
}

func podCondition(t corev1.PodConditionType, s corev1.ConditionStatus, reason, message string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

func readyPod() corev1.PodStatus {
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			podCondition(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
			podCondition(corev1.PodReady, corev1.ConditionTrue, "", ""),
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "resource", Ready: true, Image: "formahub/formspec-resource:1.4.0", ImageID: "formahub/formspec-resource@sha256:0",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}},
	}
}

// event records a core Event about an object, as a controller or the
// kubelet does.
func (w *world) event(obj controlplane.Object, typ, reason, message, component string, count int32, ago time.Duration) {
	w.t.Helper()
	ns, name, uid := metaOf(obj)
	last := metav1.NewTime(time.Now().Add(-ago))
	w.create(&corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: obj["apiVersion"].(string), Kind: obj["kind"].(string), Namespace: ns, Name: name, UID: types.UID(uid)},
		Type:           typ, Reason: reason, Message: message, Count: count,
		FirstTimestamp: last, LastTimestamp: last,
		Source: corev1.EventSource{Component: component},
	})
}

// reporterEvent records an events.k8s.io Event, as the reporter does.
func (w *world) reporterEvent(obj controlplane.Object, typ, reason, note string) {
	w.t.Helper()
	ns, name, uid := metaOf(obj)
	w.create(map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata":  map[string]any{"generateName": name + "-", "namespace": ns},
		"eventTime": metav1.NewMicroTime(time.Now()).Format("2006-01-02T15:04:05.000000Z07:00"),
		"regarding": map[string]any{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "namespace": ns, "name": name, "uid": uid},
		"type":      typ, "reason": reason, "note": note, "action": reason,
		"reportingController": "formspec.dev/reporter", "reportingInstance": "formspec-reporter-0",
	})
}

// namespace creates a namespace with its default ServiceAccount, which
// pods need and which no controller creates here.
func (w *world) namespace(name string) {
	w.t.Helper()
	w.create(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	w.create(map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": name}})
}
