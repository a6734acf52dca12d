package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
	"github.com/formspec/formspec-hooks/test/original"
)

// testTakeover walks docs/migrating.md under a real Metacontroller: the
// original operator's children exist before Metacontroller runs (it is
// stopped for that, as a cluster is before the install), `kubectl formspec
// takeover prepare` labels them, and once Metacontroller runs they stay
// the Workspace's children, as they were, while it is held; `takeover
// roll` releases it, and the hooks take the children over in place. A
// Workspace of another namespace whose original children were not
// prepared shows what the step prevents: Metacontroller releases them;
// its apply of the workspace's Deployment onto the original one fails (the
// selector is immutable), and the apply onto the original Service, owned
// by nobody once released, is refused by the install's admission policy:
// both stay as they are, and the Workspace turns Degraded,
// ChildNotCreated.
func testTakeover(t *testing.T, e *env) {
	const ns, nsSkipped, className, name = "e2e-takeover", "e2e-takeover-skipped", "e2e-takeover", "legacy"
	plugin := buildPlugin(t, e.dir)
	made := map[string]original.Workspace{}
	e.restartMetacontroller(t, func() {
		e.namespace(t, ns)
		e.namespace(t, nsSkipped)
		e.apply(t, clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)}))
		for _, n := range []string{ns, nsSkipped} {
			ws := newWorkspace(n, name, className)
			e.apply(t, ws)
			got, err := e.workspace(n, name)
			if err != nil {
				t.Fatal(err)
			}
			w := original.Workspace{Namespace: n, Name: name, UID: got.UID, Image: "formahub/formspec-resource:1.8.2", Replicas: 1,
				ControlClusterURL: controlClusterURL, Config: map[string]string{"LOG_LEVEL": "info"}}
			for _, obj := range w.Children() {
				if _, err := original.Create(e.c, obj); err != nil {
					t.Fatal(err)
				}
			}
			e.patch(t, v1alpha1.APIVersion, "Workspace", n, name, "status", map[string]any{"status": original.Status(true)})
			if err := e.runDeployment(n, name); err != nil {
				t.Fatal(err)
			}
			made[n] = w
		}
		out := runPlugin(t, e, plugin, "takeover", "prepare", "-n", ns)
		if !strings.Contains(out, ns+"/"+name+"   prepared Deployment/legacy, Service/legacy, ConfigMap/legacy; fields of "+original.FieldManager+" moved to Metacontroller's field manager; held") {
			t.Fatalf("takeover prepare:\n%s", out)
		}
	})

	// Held: the children stay the Workspace's, labelled, as they were.
	e.eventually(t, "Workspace "+ns+"/"+name+" held", e.progressing(ns, name, v1alpha1.ReasonTakeoverHeld))
	before, err := e.deployment(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range [][2]string{{"apps/v1", "Deployment"}, {"v1", "Service"}, {"v1", "ConfigMap"}} {
		e.owned(t, kind[0], kind[1], ns, name, made[ns].UID)
	}
	if c := before.Spec.Template.Spec.Containers; before.Generation != 1 || len(c) != 1 || c[0].Name != original.Container {
		t.Errorf("the held Deployment changed: generation %d, containers %v", before.Generation, c)
	}

	// Not prepared: released by Metacontroller, then left alone.
	e.eventually(t, "Workspace "+nsSkipped+"/"+name+" Degraded", e.workspacePhase(nsSkipped, name, v1alpha1.PhaseDegraded, v1alpha1.ReasonChildNotCreated))
	if dep, err := e.deployment(nsSkipped, name); err != nil || dep.Generation != 1 || metav1.GetControllerOfNoCopy(dep) != nil ||
		len(dep.Spec.Template.Spec.Containers) != 1 || dep.Spec.Template.Spec.Containers[0].Name != original.Container {
		t.Errorf("the original Deployment of an unprepared workspace was changed (%v): %+v", err, dep)
	}
	if svc, err := getAs[corev1.Service](e.c, "v1", "Service", nsSkipped, name); err != nil || svc == nil || !maps.Equal(svc.Spec.Selector, made[nsSkipped].Labels()) ||
		metav1.GetControllerOfNoCopy(svc) != nil {
		t.Errorf("the original Service of an unprepared workspace was changed: %+v (%v)", svc, err)
	}

	// Released, a roll at a time, the test playing the Deployment
	// controller meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rolled := make(chan string, 1)
	go func() {
		rolled <- runPluginCtx(ctx, e, plugin, "takeover", "roll", "-n", ns, "--interval", "200ms", "--timeout", "90s")
	}()
	var out string
	for out == "" {
		select {
		case out = <-rolled:
		case <-time.After(pollInterval):
			_ = e.runDeployment(ns, name)
		}
	}
	if !strings.Contains(out, ns+"/"+name+" taken over: Ready") || !strings.Contains(out, "1 taken over, 0 failed, 0 still held") {
		t.Fatalf("takeover roll:\n%s", out)
	}
	t.Logf("takeover roll:\n%s", out)

	// In place: the same Deployment object, its selector kept, one new
	// template with the hooks' container only, the Service on the new
	// pods, the original ConfigMap gone, every child the Workspace's.
	after, err := e.deployment(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	switch c := after.Spec.Template.Spec.Containers; {
	case after.UID != before.UID:
		t.Errorf("the Deployment was replaced (UID %s → %s)", before.UID, after.UID)
	case !maps.Equal(after.Spec.Selector.MatchLabels, made[ns].Labels()):
		t.Errorf("the Deployment's selector is %v, want the original %v", after.Spec.Selector, made[ns].Labels())
	case len(c) != 1 || c[0].Name != "resource":
		t.Errorf("the pod template's containers are %v, want the hooks' alone", names(c))
	case after.Spec.Template.Labels["app"] != name || after.Spec.Template.Labels[v1alpha1.LabelWorkspace] != name:
		t.Errorf("the pod template's labels %v lack the selector's or the hooks'", after.Spec.Template.Labels)
	case after.Generation != before.Generation+1:
		t.Errorf("the Deployment's generation went from %d to %d: one template change was expected", before.Generation, after.Generation)
	}
	for _, env := range after.Spec.Template.Spec.Containers[0].Env {
		if env.Name == "OPERATOR" {
			t.Errorf("the original operator's environment stayed: %v", env)
		}
	}
	svc, err := getAs[corev1.Service](e.c, "v1", "Service", ns, name)
	if err != nil || svc == nil || !maps.Equal(svc.Spec.Selector, map[string]string{v1alpha1.LabelWorkspace: name}) {
		t.Errorf("Service %s/%s: %v (%v), want it on the hooks' selector", ns, name, svc, err)
	}
	e.eventually(t, "the original ConfigMap "+ns+"/"+name+" gone", func() error {
		if ok, err := e.exists("v1", "ConfigMap", ns, name); err != nil || ok {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	for _, kind := range [][3]string{{"apps/v1", "Deployment", name}, {"v1", "Service", name}, {"v1", "ConfigMap", name + "-config"}} {
		e.owned(t, kind[0], kind[1], ns, kind[2], made[ns].UID)
	}
	if ws, err := e.workspace(ns, name); err != nil || ws.Annotations[v1alpha1.AnnotationTakeover] != "" {
		t.Errorf("Workspace %s/%s is still held (%v)", ns, name, err)
	}
}

// progressing checks the reason of a Workspace's Progressing condition.
func (e *env) progressing(ns, name, reason string) func() error {
	return func() error {
		ws, err := e.workspaceStatus(ns, name)
		if err != nil {
			return err
		}
		if got := condition(ws.Status.Conditions, v1alpha1.ConditionProgressing); got.Reason != reason {
			return fmt.Errorf("conditions %v", conds(ws.Status.Conditions))
		}
		return nil
	}
}

// owned checks that an object's controller is the Workspace and that it
// carries the label of Metacontroller's generated selector: Metacontroller
// has it as the Workspace's child, not released.
func (e *env) owned(t *testing.T, apiVersion, kind, ns, name string, uid types.UID) {
	t.Helper()
	obj, err := getAs[metav1.PartialObjectMetadata](e.c, apiVersion, kind, ns, name)
	if err != nil || obj == nil {
		t.Fatalf("%s %s/%s: %v", kind, ns, name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref == nil || ref.UID != uid || obj.Labels["controller-uid"] != string(uid) {
		t.Errorf("%s %s/%s is not the Workspace's child: controller %v, labels %v", kind, ns, name, ref, obj.Labels)
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// buildPlugin builds the kubectl plugin into dir.
func buildPlugin(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kubectl-formspec")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-formspec")
	cmd.Dir = controlplane.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-formspec: %v\n%s", err, out)
	}
	return bin
}

// runPlugin runs the plugin with the control plane's admin kubeconfig and
// returns what it printed; it fails the test when the plugin fails.
func runPlugin(t *testing.T, e *env, bin string, args ...string) string {
	t.Helper()
	out := runPluginCtx(context.Background(), e, bin, args...)
	if strings.HasPrefix(out, "exit ") {
		t.Fatalf("kubectl formspec %s: %s", strings.Join(args, " "), out)
	}
	return out
}

// runPluginCtx runs the plugin; a failure is "exit <error>" and the output.
func runPluginCtx(ctx context.Context, e *env, bin string, args ...string) string {
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", e.cp.Kubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("exit %v\n%s", err, out.String())
	}
	return out.String()
}
