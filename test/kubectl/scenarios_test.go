package kubectl

import (
	"encoding/json"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/datastore"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// The namespaces of the tests: team-a holds a Workspace in every state a
// trace explains, data the Datastores (as claimstest has it), team-b the
// Workspaces diff changes.
const (
	nsA    = claimstest.ClaimNamespace
	nsData = claimstest.DatastoreNamespace
	nsB    = "team-b"
)

// The objects whose names the tests use.
const (
	unlabeledDatastore = "audit-db"
	deniedClaim        = "billing-orders"
)

// build creates the world of the tests, every object synced by the hooks
// and given the status its controller would write.
func (w *world) build() {
	w.t.Helper()
	for _, ns := range []string{nsA, nsData, nsB} {
		w.namespace(ns)
	}
	w.class("standard", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)})
	w.class("sleepy", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), ScaleToZero: true})
	w.class("autoscale", v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4)}, v1alpha1.FeatureAutoScaling)
	w.class("elastic", v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4)}, v1alpha1.FeatureAutoScaling)
	w.class("doomed", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1)})
	w.datastores()
	w.claims()
	w.viewer()

	// Ready, with a granted claim and a ReplicaSet left from an earlier
	// rollout.
	w.workspace(nsA, "shop", "standard", func(ws *v1alpha1.Workspace) {
		ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: claimstest.DatastoreName, Namespace: nsData, EnvPrefix: "ORDERS_"}}
	})
	dep := as[appsv1.Deployment](w.t, w.get("apps/v1", "Deployment", nsA, "shop"))
	w.replicaSet(dep, "5f6a7b", 1, 0, 0)
	w.runDeployment(nsA, "shop")
	w.event(w.get("apps/v1", "Deployment", nsA, "shop"), corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set shop-7d4b9c from 0 to 1", "deployment-controller", 1, 5*time.Minute)
	w.sync(nsA, "shop", nil)

	// Ready, scaled by an HPA, with a PodDisruptionBudget.
	w.workspace(nsA, "scaled", "autoscale", nil)
	w.runDeployment(nsA, "scaled")
	w.autoscale(nsA, "scaled")
	w.sync(nsA, "scaled", nil)

	// Idle: scaled to zero on purpose.
	w.workspace(nsA, "idle", "sleepy", func(ws *v1alpha1.Workspace) {
		ws.Annotations = map[string]string{v1alpha1.AnnotationIdle: "true"}
	})
	w.runDeployment(nsA, "idle")
	w.sync(nsA, "idle", nil)

	// Degraded, ClusterClassNotFound: the class went after the workspace
	// was running.
	w.workspace(nsA, "classless", "doomed", nil)
	w.runDeployment(nsA, "classless")
	w.sync(nsA, "classless", nil)
	if err := w.c.DeleteWithPropagation(v1alpha1.APIVersion, "ClusterClass", "", "doomed", "Background"); err != nil {
		w.t.Fatal(err)
	}
	w.sync(nsA, "classless", nil)

	// Degraded, InvalidSpec. The CRD refuses a mistyped field, so the hook
	// sees one only from an API server whose CRD is older than the hooks:
	// that is what the request says here.
	w.workspace(nsA, "invalid", "standard", nil)
	w.runDeployment(nsA, "invalid")
	w.sync(nsA, "invalid", mistypeToleration)

	// Degraded, ProgressDeadlineExceeded: the image does not pull.
	w.workspace(nsA, "stalled", "standard", func(ws *v1alpha1.Workspace) { ws.Spec.Version = "9.9.9" })
	w.stall(nsA, "stalled")
	w.sync(nsA, "stalled", nil)

	// Degraded, ReplicaFailure: the namespace's quota refuses the pod.
	w.workspace(nsA, "quota", "standard", nil)
	w.refuseQuota(nsA, "quota")
	w.sync(nsA, "quota", nil)

	// Degraded, DatastoreNotInjected: one claim denied, one datastore with
	// no claim at all.
	w.workspace(nsA, "billing", "standard", func(ws *v1alpha1.Workspace) {
		ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: claimstest.DatastoreName, Namespace: nsData}, {Name: "ledger-db"}}
	})
	w.runDeployment(nsA, "billing")
	w.sync(nsA, "billing", nil)

	// Terminating: deleted while running; its pod is going.
	w.workspace(nsA, "leaving", "standard", func(ws *v1alpha1.Workspace) {
		ws.Finalizers = []string{"metacontroller.io/compositecontroller-formspec-workspace"}
	})
	rs := w.runDeployment(nsA, "leaving")
	w.sync(nsA, "leaving", nil)
	if err := w.c.DeleteWithPropagation(v1alpha1.APIVersion, "Workspace", nsA, "leaving", "Background"); err != nil {
		w.t.Fatal(err)
	}
	w.sync(nsA, "leaving", nil)
	// The pod is bound to a node, so it stays Terminating until a kubelet
	// confirms it stopped: none does here.
	if err := w.c.DeleteWithPropagation("v1", "Pod", nsA, podName(rs, 0), "Background"); err != nil {
		w.t.Fatal(err)
	}

	// team-b: what diff is shown changing.
	w.workspace(nsB, "api", "elastic", nil)
	w.runDeployment(nsB, "api")
	w.autoscale(nsB, "api")
	w.sync(nsB, "api", nil)
	w.workspace(nsB, "web", "standard", func(ws *v1alpha1.Workspace) { ws.Spec.Config = map[string]string{"GREETING": "hello"} })
	w.runDeployment(nsB, "web")
	w.sync(nsB, "web", nil)
}

// viewer is a user with what a namespace's view rights give on the
// objects a trace reads: the Workspace, its children, pods, claims,
// Datastores and Events, and neither ClusterClasses (cluster-scoped) nor
// Secrets.
const viewer = "viewer@team-a"

func (w *world) viewer() {
	w.t.Helper()
	read := []string{"get", "list", "watch"}
	for ns, rules := range map[string][]map[string]any{
		nsA: {
			{"apiGroups": []string{v1alpha1.Group}, "resources": []string{"workspaces", "resourceclaims"}, "verbs": read},
			{"apiGroups": []string{"apps"}, "resources": []string{"deployments", "replicasets"}, "verbs": read},
			{"apiGroups": []string{""}, "resources": []string{"pods", "services", "configmaps", "events"}, "verbs": read},
			{"apiGroups": []string{"autoscaling"}, "resources": []string{"horizontalpodautoscalers"}, "verbs": read},
			{"apiGroups": []string{"policy"}, "resources": []string{"poddisruptionbudgets"}, "verbs": read},
		},
		nsData: {{"apiGroups": []string{v1alpha1.Group}, "resources": []string{"datastores"}, "verbs": read}},
	} {
		w.create(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "trace-viewer", "namespace": ns}, "rules": rules})
		w.create(map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "trace-viewer", "namespace": ns},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "trace-viewer"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": viewer}},
		})
	}
}

func (w *world) class(name string, s v1alpha1.Scaling, features ...string) {
	w.t.Helper()
	w.create(&v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ClusterClassSpec{Scaling: s, Features: features},
	})
}

// workspace creates a Workspace and has it synced once.
func (w *world) workspace(namespace, name, class string, edit func(*v1alpha1.Workspace)) {
	w.t.Helper()
	ws := &v1alpha1.Workspace{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       v1alpha1.WorkspaceSpec{ClusterClass: class, Owner: "acme", Region: "eu-west-1", Environment: "production"},
	}
	if edit != nil {
		edit(ws)
	}
	w.create(ws)
	w.sync(namespace, name, nil)
}

// datastores creates the Datastore of claimstest, allowing every
// workspace of team-a and team-b, and one whose endpoint Secret lacks the
// consent label; the datastore hook validates both.
func (w *world) datastores() {
	w.t.Helper()
	for _, name := range []string{claimstest.DatastoreName, unlabeledDatastore} {
		secret := claimstest.Secret()
		secret.ObjectMeta = metav1.ObjectMeta{Name: name + "-endpoint", Namespace: nsData, Labels: secret.Labels}
		ds := claimstest.Datastore()
		ds.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: nsData}
		ds.Spec.EndpointSecretRef.Name = secret.Name
		ds.Spec.AllowedTenants = []string{nsA + "/*", nsB + "/*"}
		if name == unlabeledDatastore {
			secret.Labels = nil
		}
		w.create(secret)
		obj := w.create(ds)
		w.decorate(obj, metacontroller.ObjectMap{
			metacontroller.Key("v1", "Secret"): {metacontroller.Name(nsData, secret.Name): raw(w.get("v1", "Secret", nsData, secret.Name))},
		}, datastore.New(datastore.Options{}).Sync)
	}
}

// claims creates two claims of team-a on the Datastore, each verified by
// the resourceclaim hook: one signed by the Datastore's owner (granted:
// its credentials Secret holds the endpoint's password), one by a key the
// Datastore does not know (denied).
func (w *world) claims() {
	w.t.Helper()
	grantedAt := time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Format(time.RFC3339)
	related := metacontroller.ObjectMap{
		metacontroller.Key(v1alpha1.APIVersion, "Datastore"): {metacontroller.Name(nsData, claimstest.DatastoreName): raw(w.get(v1alpha1.APIVersion, "Datastore", nsData, claimstest.DatastoreName))},
		metacontroller.Key("v1", "Secret"):                   {metacontroller.Name(nsData, claimstest.SecretName): raw(w.get("v1", "Secret", nsData, claimstest.SecretName))},
	}
	for _, c := range []struct{ name, workspace string }{{claimstest.ClaimName, "shop"}, {deniedClaim, "billing"}} {
		claim := claimstest.Claim()
		claim.ObjectMeta = metav1.ObjectMeta{Name: c.name, Namespace: nsA}
		claim.Spec.Workspace = c.workspace
		claim.Spec.GrantedAt = grantedAt
		key := claimstest.Owner
		if c.name == deniedClaim {
			key = claimstest.Stranger
		}
		obj := w.create(claimstest.SignClaim(claim, key))
		w.decorate(obj, related, resourceclaim.New(resourceclaim.Options{}).Sync)
	}
	w.reporterEvent(w.get(v1alpha1.APIVersion, "ResourceClaim", nsA, deniedClaim), corev1.EventTypeWarning, "ClaimDenied", "the grant's signature does not verify against the Datastore's keys")
}

// autoscale writes the statuses the HPA and disruption controllers give
// a running workspace's HorizontalPodAutoscaler and PodDisruptionBudget.
func (w *world) autoscale(namespace, name string) {
	w.t.Helper()
	now := metav1.Now()
	w.applyStatus("autoscaling/v2", "HorizontalPodAutoscaler", namespace, name, autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 2, DesiredReplicas: 2,
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", Message: "recommended size matches current size", LastTransitionTime: now},
			{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count from cpu resource utilization", LastTransitionTime: now},
		},
	})
	pdb := as[policyv1.PodDisruptionBudget](w.t, w.get("policy/v1", "PodDisruptionBudget", namespace, name))
	w.applyStatus("policy/v1", "PodDisruptionBudget", namespace, name, policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation, CurrentHealthy: 2, DesiredHealthy: 1, DisruptionsAllowed: 1, ExpectedPods: 2,
		Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason, Message: "", LastTransitionTime: now, ObservedGeneration: pdb.Generation}},
	})
}

// stall plays a rollout whose image does not pull: the pod waits in
// ImagePullBackOff and the Deployment exceeds its progress deadline.
func (w *world) stall(namespace, name string) {
	w.t.Helper()
	dep := as[appsv1.Deployment](w.t, w.get("apps/v1", "Deployment", namespace, name))
	rs := w.replicaSet(dep, currentHash, 1, 1, 0)
	image := dep.Spec.Template.Spec.Containers[0].Image
	w.pod(rs, podName(rs, 0), corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{
			podCondition(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
			podCondition(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [resource]"),
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "resource", Image: image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `"`}},
		}},
	})
	w.event(w.get("v1", "Pod", namespace, podName(rs, 0)), corev1.EventTypeWarning, "Failed", `Failed to pull image "`+image+`": not found`, "kubelet", 7, time.Minute)
	w.applyStatus("apps/v1", "Deployment", namespace, name, appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			deploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
			deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", `ReplicaSet "`+rs.Name+`" has timed out progressing.`),
		},
	})
}

// quotaMessage is what the ReplicaSet controller reports when a
// ResourceQuota refuses a pod.
const quotaMessage = `pods "quota-7d4b9c-x" is forbidden: exceeded quota: team-a-pods, requested: pods=1, used: pods=10, limited: pods=10`

// refuseQuota plays a namespace whose ResourceQuota refuses the pod.
func (w *world) refuseQuota(namespace, name string) {
	w.t.Helper()
	dep := as[appsv1.Deployment](w.t, w.get("apps/v1", "Deployment", namespace, name))
	rs := w.replicaSet(dep, currentHash, 1, 1, 0, appsv1.ReplicaSetCondition{
		Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: quotaMessage, LastTransitionTime: metav1.Now(),
	})
	w.event(object(rs), corev1.EventTypeWarning, "FailedCreate", "Error creating: "+quotaMessage, "replicaset-controller", 12, 30*time.Second)
	w.applyStatus("apps/v1", "Deployment", namespace, name, appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			deploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
			deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", `ReplicaSet "`+rs.Name+`" is progressing.`),
			deploymentCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", quotaMessage),
		},
	})
}

// mistypeToleration gives the request's Workspace a toleration whose
// tolerationSeconds is a string, which the Go types refuse.
func mistypeToleration(req *metacontroller.CompositeRequest) {
	var parent controlplane.Object
	if err := json.Unmarshal(req.Parent, &parent); err != nil {
		panic(err)
	}
	parent["spec"].(map[string]any)["pod"] = map[string]any{"tolerations": []any{
		map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "abc"},
	}}
	req.Parent = raw(parent)
}
