package e2e

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// TestMetacontroller runs every end-to-end case against one control plane,
// hook server, reporter and Metacontroller, installed as deploy/ installs
// them (TLS and a bearer token; the reporter writing the claims summaries
// the workspace hook reads) and with Metacontroller's server-side apply: starting
// them takes seconds, and each case works in its own namespaces and
// ClusterClasses, so the cases run in parallel. Then, one after the other
// because each restarts Metacontroller, a wrong token and a wrong CA must
// get no answer from the hooks, and the children of the original operator,
// made while Metacontroller is stopped, are taken over.
func TestMetacontroller(t *testing.T) {
	e := startEnv(t)
	e.startClaimsReporter(t)
	t.Run("cases", func(t *testing.T) {
		t.Run("WorkspaceLifecycle", func(t *testing.T) { t.Parallel(); testWorkspaceLifecycle(t, e) })
		t.Run("AutoScaling", func(t *testing.T) { t.Parallel(); testAutoScaling(t, e) })
		t.Run("Idle", func(t *testing.T) { t.Parallel(); testIdle(t, e) })
		t.Run("Credentials", func(t *testing.T) { t.Parallel(); testCredentials(t, e) })
		t.Run("GrantRevocation", func(t *testing.T) { t.Parallel(); testRevocation(t, e) })
		t.Run("V1OptIn", func(t *testing.T) { t.Parallel(); testV1OptIn(t, e, nil) })
		t.Run("CredentialsRotation", func(t *testing.T) { t.Parallel(); testRotation(t, e) })
	})
	t.Run("WrongToken", func(t *testing.T) { testWrongToken(t, e) })
	t.Run("WrongCA", func(t *testing.T) { testWrongCA(t, e) })
	// It stops Metacontroller while the original operator's world is made.
	t.Run("Takeover", func(t *testing.T) { testTakeover(t, e) })
	// Each of those started Metacontroller from its subtest, which stopped
	// it when it ended: run it again, from this test, with the install
	// put right, for the cleanup.
	e.restartMetacontroller(t, func() {})
}

// TestClaimsRelated runs the credentials cases with the hook server
// relating the claims of a namespace to each Workspace
// (--workspace-claims=related), and a reporter that writes no claims
// summary: a workspace still receives its credentials when its claim is
// granted, loses them when it is revoked, and rolls when they rotate,
// from the claims Metacontroller hands it.
func TestClaimsRelated(t *testing.T) {
	e := startEnvWith(t, envConfig{claimsRelated: true})
	e.startClaimsReporter(t, "--write-claims-summary=false")
	t.Run("Credentials", func(t *testing.T) { t.Parallel(); testCredentials(t, e) })
	t.Run("GrantRevocation", func(t *testing.T) { t.Parallel(); testRevocation(t, e) })
	t.Run("CredentialsRotation", func(t *testing.T) { t.Parallel(); testRotation(t, e) })
}

// deploymentShape is what the lifecycle case checks of the Deployment.
type deploymentShape struct {
	Labels     map[string]string
	Controller string
	Replicas   int32
	Image      string
	ConfigHash string
	Env        []corev1.EnvVar
	EnvFrom    []corev1.EnvFromSource
}

func shapeOf(dep *appsv1.Deployment) deploymentShape {
	s := deploymentShape{
		Labels:     dep.Labels,
		Controller: controller(dep.ObjectMeta),
		Replicas:   ptr.Deref(dep.Spec.Replicas, -1),
		ConfigHash: dep.Spec.Template.Annotations[v1alpha1.AnnotationConfigHash],
	}
	if cs := dep.Spec.Template.Spec.Containers; len(cs) == 1 {
		s.Image, s.Env, s.EnvFrom = cs[0].Image, cs[0].Env, cs[0].EnvFrom
	}
	return s
}

// testWorkspaceLifecycle walks one Workspace from creation to deletion:
// its children appear, it turns Ready once its Deployment is, a config
// change reaches the ConfigMap and rolls the pod template, and deleting it
// tears it down in order.
func testWorkspaceLifecycle(t *testing.T, e *env) {
	const ns, name, className = "e2e-lifecycle", "acme", "e2e-standard"
	e.namespace(t, ns)
	class := clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)})
	e.apply(t, class)
	ws := newWorkspace(ns, name, className)
	e.apply(t, ws)

	// 1. The children appear with the hook's shape, and the status says
	// the workspace is on its way.
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var cm *corev1.ConfigMap
	e.eventually(t, "the Deployment, Service and ConfigMap of "+ns+"/"+name, func() error {
		var err error
		if dep, err = e.deployment(ns, name); err != nil || dep == nil {
			return fmt.Errorf("Deployment: %v", err)
		}
		if svc, err = getAs[corev1.Service](e.c, "v1", "Service", ns, name); err != nil || svc == nil {
			return fmt.Errorf("Service: %v", err)
		}
		if cm, err = getAs[corev1.ConfigMap](e.c, "v1", "ConfigMap", ns, name+"-config"); err != nil || cm == nil {
			return fmt.Errorf("ConfigMap: %v", err)
		}
		return nil
	})
	stored, err := e.workspace(ns, name)
	if err != nil {
		t.Fatalf("cannot read Workspace %s/%s: %v", ns, name, err)
	}
	// generateSelector: Metacontroller labels each child with the
	// Workspace's uid on top of the hook's labels.
	labels := wantLabels(name, className)
	labels["controller-uid"] = string(stored.UID)
	want := deploymentShape{
		Labels:     labels,
		Controller: "Workspace/" + name,
		Replicas:   1,
		Image:      "formahub/formspec-resource:1.8.2",
		ConfigHash: render(t, ws, class).Spec.Template.Annotations[v1alpha1.AnnotationConfigHash],
		Env: []corev1.EnvVar{
			{Name: "CONTROL_CLUSTER_URL", Value: controlClusterURL},
			{Name: "WORKSPACE_ID", Value: name},
			{Name: "WORKSPACE_NAMESPACE", Value: ns},
			{Name: "WORKSPACE_REGION", Value: "ap-southeast-3"},
			{Name: "WORKSPACE_ENVIRONMENT", Value: "production"},
		},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}},
	}
	if diff := cmp.Diff(want, shapeOf(dep)); diff != "" {
		t.Errorf("Deployment %s/%s: -want, +got:\n%s", ns, name, diff)
	}
	if want.ConfigHash == "" {
		t.Error("the rendered Deployment has no config hash to compare with")
	}
	type serviceShape struct {
		Labels     map[string]string
		Controller string
		Selector   map[string]string
		Ports      []corev1.ServicePort
	}
	wantSvc := serviceShape{
		Labels:     labels,
		Controller: "Workspace/" + name,
		Selector:   map[string]string{v1alpha1.LabelWorkspace: name},
		Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
	}
	gotSvc := serviceShape{Labels: svc.Labels, Controller: controller(svc.ObjectMeta), Selector: svc.Spec.Selector, Ports: svc.Spec.Ports}
	if diff := cmp.Diff(wantSvc, gotSvc); diff != "" {
		t.Errorf("Service %s/%s: -want, +got:\n%s", ns, name, diff)
	}
	if diff := cmp.Diff(map[string]string{"LOG_LEVEL": "info"}, cm.Data); diff != "" {
		t.Errorf("ConfigMap %s/%s-config data: -want, +got:\n%s", ns, name, diff)
	}

	var got *v1alpha1.Workspace
	e.eventually(t, "a status on Workspace "+ns+"/"+name+" that has seen its children", func() error {
		var err error
		if got, err = e.workspace(ns, name); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation || got.Status.ServiceName == "" {
			return fmt.Errorf("status: %+v", got.Status)
		}
		return nil
	})
	wantConds := []cond{
		{Type: v1alpha1.ConditionReady, Status: "False", Reason: "ReplicasUnavailable"},
		{Type: v1alpha1.ConditionProgressing, Status: "True", Reason: "RollingOut"},
		{Type: v1alpha1.ConditionDegraded, Status: "False", Reason: "AsExpected"},
	}
	if diff := cmp.Diff(wantConds, conds(got.Status.Conditions)); diff != "" {
		t.Errorf("conditions of Workspace %s/%s with its Deployment not yet rolled out: -want, +got:\n%s", ns, name, diff)
	}
	if diff := cmp.Diff(v1alpha1.PhaseProgressing, got.Status.Phase); diff != "" {
		t.Errorf("phase: -want, +got:\n%s", diff)
	}
	if !containsString(got.Finalizers, workspaceFinalizer) {
		t.Errorf("finalizers of Workspace %s/%s: got %q, want %q among them", ns, name, got.Finalizers, workspaceFinalizer)
	}

	// 2. Once the Deployment reports every replica available, the
	// workspace is Ready.
	e.eventually(t, "Workspace "+ns+"/"+name+" Ready", func() error {
		if err := e.runDeployment(ns, name); err != nil {
			return err
		}
		ws, err := e.workspace(ns, name)
		if err != nil {
			return err
		}
		if ws.Status.Phase != v1alpha1.PhaseReady || condition(ws.Status.Conditions, v1alpha1.ConditionReady).Status != "True" {
			return fmt.Errorf("phase %q, conditions %v", ws.Status.Phase, conds(ws.Status.Conditions))
		}
		got = ws
		return nil
	})
	wantConds = []cond{
		{Type: v1alpha1.ConditionReady, Status: "True", Reason: "ReplicasAvailable"},
		{Type: v1alpha1.ConditionProgressing, Status: "False", Reason: "RolloutComplete"},
		{Type: v1alpha1.ConditionDegraded, Status: "False", Reason: "AsExpected"},
	}
	if diff := cmp.Diff(wantConds, conds(got.Status.Conditions)); diff != "" {
		t.Errorf("conditions of the Ready Workspace %s/%s: -want, +got:\n%s", ns, name, diff)
	}
	type counts struct{ Replicas, Ready, Updated int32 }
	if diff := cmp.Diff(counts{1, 1, 1}, counts{got.Status.Replicas, got.Status.ReadyReplicas, got.Status.UpdatedReplicas}); diff != "" {
		t.Errorf("replica counts in the status: -want, +got:\n%s", diff)
	}

	// A config change reaches the ConfigMap and rolls the pod template.
	ws.Spec.Config = map[string]string{"LOG_LEVEL": "debug"}
	e.apply(t, ws)
	wantHash := render(t, ws, class).Spec.Template.Annotations[v1alpha1.AnnotationConfigHash]
	e.eventually(t, "the new config in ConfigMap "+ns+"/"+name+"-config and its hash in the pod template", func() error {
		cm, err := getAs[corev1.ConfigMap](e.c, "v1", "ConfigMap", ns, name+"-config")
		if err != nil || cm == nil {
			return fmt.Errorf("ConfigMap: %v", err)
		}
		if cm.Data["LOG_LEVEL"] != "debug" {
			return fmt.Errorf("ConfigMap data %v", cm.Data)
		}
		dep, err := e.deployment(ns, name)
		if err != nil || dep == nil {
			return fmt.Errorf("Deployment: %v", err)
		}
		if got := dep.Spec.Template.Annotations[v1alpha1.AnnotationConfigHash]; got != wantHash {
			return fmt.Errorf("config hash %q, want %q", got, wantHash)
		}
		return nil
	})

	// 5. Deletion tears down in order.
	e.teardown(t, ns, name)
}

// teardown deletes a Workspace as kubectl would (background propagation)
// and follows the finalize hook's two steps: first the HPA goes and the
// Deployment is scaled to zero while everything else stays; only once the
// Deployment reports no replicas do the children go, the finalizer is
// released and the Workspace disappears.
func (e *env) teardown(t *testing.T, ns, name string) {
	t.Helper()
	if err := e.c.DeleteWithPropagation(v1alpha1.APIVersion, "Workspace", ns, name, "Background"); err != nil {
		t.Fatalf("cannot delete Workspace %s/%s: %v", ns, name, err)
	}
	// Step one. Nothing plays the Deployment controller here, so the
	// Deployment keeps reporting its old replicas and the teardown must
	// wait in this state.
	e.eventually(t, "Deployment "+ns+"/"+name+" scaled to zero and its HPA gone while Workspace "+ns+"/"+name+" waits", func() error {
		dep, err := e.deployment(ns, name)
		if err != nil {
			return err
		}
		if dep == nil {
			return fail("Deployment %s/%s was removed before it reported zero replicas", ns, name)
		}
		if dep.Status.Replicas == 0 {
			return fail("Deployment %s/%s reports no replicas before the teardown; the test cannot tell the steps apart", ns, name)
		}
		if r := ptr.Deref(dep.Spec.Replicas, 1); r != 0 {
			return fmt.Errorf("Deployment spec.replicas %d", r)
		}
		if hpa, err := e.exists("autoscaling/v2", "HorizontalPodAutoscaler", ns, name); err != nil || hpa {
			return fmt.Errorf("HPA still there (%v)", err)
		}
		for _, child := range []struct{ apiVersion, kind, name string }{
			{"v1", "Service", name},
			{"v1", "ConfigMap", name + "-config"},
		} {
			ok, err := e.exists(child.apiVersion, child.kind, ns, child.name)
			if err != nil {
				return err
			}
			if !ok {
				return fail("%s %s/%s was removed while the Deployment was still draining", child.kind, ns, child.name)
			}
		}
		ws, err := getAs[v1alpha1.Workspace](e.c, v1alpha1.APIVersion, "Workspace", ns, name)
		if err != nil {
			return err
		}
		if ws == nil {
			return fail("Workspace %s/%s is gone before its Deployment drained", ns, name)
		}
		if ws.DeletionTimestamp == nil || !containsString(ws.Finalizers, workspaceFinalizer) {
			return fmt.Errorf("Workspace deletionTimestamp %v, finalizers %q", ws.DeletionTimestamp, ws.Finalizers)
		}
		return nil
	})

	// Step two: the pods are gone, so everything goes.
	e.eventually(t, "the children of Workspace "+ns+"/"+name+" and the Workspace itself gone", func() error {
		if dep, err := e.deployment(ns, name); err != nil {
			return err
		} else if dep != nil {
			if err := e.runDeployment(ns, name); err != nil {
				return err
			}
			return fmt.Errorf("Deployment still there")
		}
		for _, child := range []struct{ apiVersion, kind, name string }{
			{"v1", "Service", name},
			{"v1", "ConfigMap", name + "-config"},
			{"autoscaling/v2", "HorizontalPodAutoscaler", name},
			{"policy/v1", "PodDisruptionBudget", name},
		} {
			if ok, err := e.exists(child.apiVersion, child.kind, ns, child.name); err != nil || ok {
				return fmt.Errorf("%s still there (%v)", child.kind, err)
			}
		}
		ws, err := getAs[v1alpha1.Workspace](e.c, v1alpha1.APIVersion, "Workspace", ns, name)
		if err != nil {
			return err
		}
		if ws != nil {
			return fmt.Errorf("Workspace still there with finalizers %q", ws.Finalizers)
		}
		return nil
	})
}

// testAutoScaling checks the replica rule under an HPA against the real
// three-way merge: a running workspace whose class gains auto-scaling keeps
// its replica count and gets an HPA, and a count the HPA chose survives
// later syncs.
func testAutoScaling(t *testing.T, e *env) {
	const ns, name, className = "e2e-autoscaling", "elastic", "e2e-growing"
	const minReplicas, maxReplicas = 2, 5
	e.namespace(t, ns)
	scaling := v1alpha1.Scaling{MinReplicas: ptr.To[int32](minReplicas), MaxReplicas: ptr.To[int32](maxReplicas)}
	e.apply(t, clusterClass(className, scaling))
	e.apply(t, newWorkspace(ns, name, className))

	e.eventually(t, "Workspace "+ns+"/"+name+" running with its class's two replicas", func() error {
		if err := e.runDeployment(ns, name); err != nil {
			return err
		}
		ws, err := e.workspace(ns, name)
		if err != nil {
			return err
		}
		if ws.Status.Phase != v1alpha1.PhaseReady || ws.Status.Replicas != minReplicas {
			return fmt.Errorf("phase %q, %d replicas", ws.Status.Phase, ws.Status.Replicas)
		}
		return nil
	})

	// The class gains auto-scaling while the workspace runs two pods.
	e.apply(t, clusterClass(className, scaling, v1alpha1.FeatureAutoScaling))
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	e.eventually(t, "an HPA for Workspace "+ns+"/"+name+" with its replicas kept", func() error {
		dep, err := e.deployment(ns, name)
		if err != nil || dep == nil {
			return fmt.Errorf("Deployment: %v", err)
		}
		if r := ptr.Deref(dep.Spec.Replicas, 1); r != minReplicas {
			return fail("Deployment %s/%s spec.replicas went from %d to %d when the class gained auto-scaling", ns, name, minReplicas, r)
		}
		if hpa, err = getAs[autoscalingv2.HorizontalPodAutoscaler](e.c, "autoscaling/v2", "HorizontalPodAutoscaler", ns, name); err != nil || hpa == nil {
			return fmt.Errorf("HPA: %v", err)
		}
		return nil
	})
	type hpaShape struct {
		Controller string
		Target     autoscalingv2.CrossVersionObjectReference
		Min, Max   int32
	}
	wantHPA := hpaShape{
		Controller: "Workspace/" + name,
		Target:     autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
		Min:        minReplicas,
		Max:        maxReplicas,
	}
	gotHPA := hpaShape{Controller: controller(hpa.ObjectMeta), Target: hpa.Spec.ScaleTargetRef, Min: ptr.Deref(hpa.Spec.MinReplicas, 0), Max: hpa.Spec.MaxReplicas}
	if diff := cmp.Diff(wantHPA, gotHPA); diff != "" {
		t.Errorf("HPA %s/%s: -want, +got:\n%s", ns, name, diff)
	}
	// The Deployment half of the sync that created the HPA may land a
	// moment after it: look again once a later sync is applied.
	dep := e.resync(t, ns, name, "e2e-after-class-change")
	if diff := cmp.Diff(int32(minReplicas), ptr.Deref(dep.Spec.Replicas, 1)); diff != "" {
		t.Errorf("Deployment %s/%s spec.replicas after the class gained auto-scaling: -want, +got:\n%s", ns, name, diff)
	}

	// The HPA scales up, through the scale subresource as it does, and the
	// Deployment rolls the extra pods out.
	const scaled = 4
	e.patch(t, "apps/v1", "Deployment", ns, name, "scale", map[string]any{"spec": map[string]any{"replicas": scaled}})
	e.eventually(t, "Workspace "+ns+"/"+name+" reporting the HPA's "+fmt.Sprint(scaled)+" replicas", func() error {
		if err := e.runDeployment(ns, name); err != nil {
			return err
		}
		ws, err := e.workspace(ns, name)
		if err != nil {
			return err
		}
		if ws.Status.Replicas != scaled {
			return fmt.Errorf("status.replicas %d", ws.Status.Replicas)
		}
		return nil
	})
	dep = e.resync(t, ns, name, "e2e-after-hpa-scale")
	if diff := cmp.Diff(int32(scaled), ptr.Deref(dep.Spec.Replicas, 1)); diff != "" {
		t.Errorf("Deployment %s/%s spec.replicas after a resync: -want (the HPA's), +got:\n%s", ns, name, diff)
	}

	e.teardown(t, ns, name)
}

// testIdle checks scale to zero: an idle workspace of a scaleToZero class
// has no pods, no HPA and no PDB, and gets them back when it wakes.
func testIdle(t *testing.T, e *env) {
	const ns, name, className = "e2e-idle", "dozy", "e2e-sleepy"
	e.namespace(t, ns)
	e.apply(t, clusterClass(className, v1alpha1.Scaling{
		MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4), ScaleToZero: true,
	}, v1alpha1.FeatureAutoScaling))
	e.apply(t, newWorkspace(ns, name, className))

	type state struct {
		Replicas int32
		HPA, PDB bool
	}
	observe := func() (state, error) {
		dep, err := e.deployment(ns, name)
		if err != nil || dep == nil {
			return state{}, fmt.Errorf("Deployment: %v", err)
		}
		s := state{Replicas: ptr.Deref(dep.Spec.Replicas, 1)}
		if s.HPA, err = e.exists("autoscaling/v2", "HorizontalPodAutoscaler", ns, name); err != nil {
			return s, err
		}
		s.PDB, err = e.exists("policy/v1", "PodDisruptionBudget", ns, name)
		return s, err
	}
	waitFor := func(what string, want state) {
		t.Helper()
		e.eventually(t, what, func() error {
			got, err := observe()
			if err != nil {
				return err
			}
			if diff := cmp.Diff(want, got); diff != "" {
				return fmt.Errorf("-want, +got:\n%s", diff)
			}
			return nil
		})
	}
	awake := state{Replicas: 2, HPA: true, PDB: true}
	waitFor("Workspace "+ns+"/"+name+" awake with an HPA and a PDB", awake)

	e.patch(t, v1alpha1.APIVersion, "Workspace", ns, name, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIdle: "true"}},
	})
	waitFor("Workspace "+ns+"/"+name+" scaled to zero without HPA or PDB", state{Replicas: 0})
	e.eventually(t, "Workspace "+ns+"/"+name+" Idle", func() error {
		if err := e.runDeployment(ns, name); err != nil {
			return err
		}
		ws, err := e.workspace(ns, name)
		if err != nil {
			return err
		}
		if ws.Status.Phase != v1alpha1.PhaseIdle {
			return fmt.Errorf("phase %q, conditions %v", ws.Status.Phase, conds(ws.Status.Conditions))
		}
		if got, want := condition(ws.Status.Conditions, v1alpha1.ConditionReady), (cond{v1alpha1.ConditionReady, "False", "ScaledToZero"}); got != want {
			return fail("Ready condition of the idle Workspace: got %+v, want %+v", got, want)
		}
		return nil
	})

	e.patch(t, v1alpha1.APIVersion, "Workspace", ns, name, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIdle: nil}},
	})
	waitFor("Workspace "+ns+"/"+name+" awake again", awake)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
