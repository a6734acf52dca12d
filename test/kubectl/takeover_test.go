package kubectl

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
	"github.com/formspec/formspec-hooks/test/original"
)

// nsTakeover holds the takeover's workspaces: one the original operator
// ran, one whose Deployment's name someone else's Deployment has, and one
// with no children at all.
const nsTakeover = "takeover"

// testTakeoverPrepare runs the first two steps of docs/migrating.md on a
// real API server: `takeover prepare` (dry run, then for real, then again)
// and the preview with `diff`. The original operator's children are made
// as it made them (test/original), under its field manager.
func testTakeoverPrepare(t *testing.T, p *plugin, w *world) {
	// The install's admission policy, which refuses Metacontroller's apply
	// onto an object nobody owns at a child's name (and diff's dry run of
	// it).
	if _, err := w.c.ApplyYAMLFile(filepath.Join(controlplane.RepoRoot(t), "deploy", "hooks", "children-admission-policy.yaml"), "test", false); err != nil {
		t.Fatal(err)
	}
	w.namespace(nsTakeover)
	waitForChildrenPolicy(t, w.c, nsTakeover)
	w.class("takeover", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)})
	var uid types.UID
	for _, name := range []string{"legacy", "taken", "fresh"} {
		ws := w.create(&v1alpha1.Workspace{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsTakeover},
			Spec:       v1alpha1.WorkspaceSpec{ClusterClass: "takeover", Version: "1.4.0"},
		})
		if name == "legacy" {
			_, _, u := metaOf(ws)
			uid = types.UID(u)
		}
	}
	legacy := original.Workspace{Namespace: nsTakeover, Name: "legacy", UID: uid, Image: "formahub/formspec-resource:1.4.0", Replicas: 1,
		ControlClusterURL: hookConfig.ControlClusterURL, Config: map[string]string{"LOG_LEVEL": "info"}}
	for _, obj := range legacy.Children() {
		if _, err := original.Create(w.c, obj); err != nil {
			t.Fatal(err)
		}
	}
	// Someone's own Deployment with the name of a Workspace's.
	someones := legacy
	someones.Name = "taken"
	dep := someones.Children()[1].(*appsv1.Deployment)
	dep.OwnerReferences = nil
	w.create(dep)
	// And someone's own ConfigMap with the name of another's ConfigMap.
	cm := someones.Children()[0].(*corev1.ConfigMap)
	cm.Name, cm.OwnerReferences = "fresh-config", nil
	w.create(cm)

	deployment := func() *appsv1.Deployment {
		return as[appsv1.Deployment](t, w.get("apps/v1", "Deployment", nsTakeover, "legacy"))
	}
	before := deployment()

	// A dry run writes nothing and says what it would do.
	r := p.run(t, "takeover", "prepare", "-n", nsTakeover, "--dry-run")
	for _, want := range []string{
		"takeover/legacy   would prepare (dry run) Deployment/legacy, Service/legacy, ConfigMap/legacy; fields of formspec-operator moved to Metacontroller's field manager; held\n",
		"takeover/taken    no children of the original operator\n  not taken over: Deployment takeover/taken: no controller owns it\n",
		"takeover/fresh    no children of the original operator\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("takeover prepare --dry-run: no %q in\n%s", want, r.stdout)
		}
	}
	if r.code != 1 {
		t.Errorf("takeover prepare --dry-run with a Deployment in the way: exit %d, want 1\nstderr:\n%s", r.code, r.stderr)
	}
	if got := deployment(); got.ResourceVersion != before.ResourceVersion {
		t.Errorf("takeover prepare --dry-run changed Deployment legacy (resourceVersion %s → %s)", before.ResourceVersion, got.ResourceVersion)
	}

	// For real: labelled, the fields moved, the Workspace held.
	r = p.run(t, "takeover", "prepare", "-n", nsTakeover)
	if r.code != 1 || !strings.Contains(r.stdout, "takeover/legacy   prepared Deployment/legacy, Service/legacy, ConfigMap/legacy; fields of formspec-operator moved to Metacontroller's field manager; held\n") {
		t.Fatalf("takeover prepare: exit %d (want 1, for the Deployment in the way)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, kind := range [][2]string{{"apps/v1", "Deployment"}, {"v1", "Service"}, {"v1", "ConfigMap"}} {
		obj := w.get(kind[0], kind[1], nsTakeover, "legacy")
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		raw, _ := json.Marshal(obj)
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Metadata.Labels["controller-uid"] != string(uid) {
			t.Errorf("%s legacy: labels %v, want controller-uid %s", kind[1], meta.Metadata.Labels, uid)
		}
		if ref := metav1.GetControllerOfNoCopy(&meta.Metadata); ref == nil || ref.UID != uid {
			t.Errorf("%s legacy: controller %v, want the Workspace", kind[1], ref)
		}
		for _, e := range meta.Metadata.ManagedFields {
			if e.Manager == original.FieldManager {
				t.Errorf("%s legacy: the original operator still manages fields: %+v", kind[1], e)
			}
		}
		if !managedBy(meta.Metadata.ManagedFields, metacontrollerManager, metav1.ManagedFieldsOperationApply) {
			t.Errorf("%s legacy: no Apply entry of %s in %+v", kind[1], metacontrollerManager, meta.Metadata.ManagedFields)
		}
	}
	if got := as[v1alpha1.Workspace](t, w.get(v1alpha1.APIVersion, "Workspace", nsTakeover, "legacy")).Annotations[v1alpha1.AnnotationTakeover]; got != v1alpha1.TakeoverHold {
		t.Errorf("Workspace legacy: %s is %q, want hold", v1alpha1.AnnotationTakeover, got)
	}
	if ws := as[v1alpha1.Workspace](t, w.get(v1alpha1.APIVersion, "Workspace", nsTakeover, "fresh")); ws.Annotations[v1alpha1.AnnotationTakeover] != "" {
		t.Errorf("Workspace fresh, with nothing to take over, is held")
	}
	if got := deployment().Spec.Template.Spec.Containers; len(got) != 1 || got[0].Name != original.Container {
		t.Errorf("takeover prepare changed the pod template: containers %+v", got)
	}

	// Again: nothing left to do, nothing written.
	prepared := deployment()
	if r := p.run(t, "takeover", "prepare", "-n", nsTakeover); r.code != 1 {
		t.Errorf("takeover prepare again: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := deployment(); got.ResourceVersion != prepared.ResourceVersion {
		t.Errorf("takeover prepare again rewrote Deployment legacy (resourceVersion %s → %s)", prepared.ResourceVersion, got.ResourceVersion)
	}

	// The preview: what the hooks will make of the held workspace once it
	// is released, dry-run applied under Metacontroller's field manager:
	// the original container goes, because its fields are Metacontroller's
	// now, and the pods roll; the original ConfigMap stays for now. For
	// the workspace whose Deployment's name is taken, the diff says whose
	// that Deployment is and that the apply onto it fails (its selector is
	// immutable); for the one whose ConfigMap's name is taken by an object
	// nobody owns, that the install's admission policy refuses the apply,
	// which would otherwise overwrite it.
	got, r := diffOutcomes(t, p, "-n", nsTakeover)
	held := "pods would roll once released (formspec.dev/takeover: hold; kubectl formspec takeover roll)"
	if got[nsTakeover+"/legacy"] != held || got[nsTakeover+"/taken"] != "changed" || got[nsTakeover+"/fresh"] != "changed" {
		t.Errorf("diff -n %s: outcomes %v\nstdout:\n%s\nstderr:\n%s", nsTakeover, got, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`    spec.template.spec.containers[workspace]: {`,
		`} → (none)`,
		`    spec.template.spec.containers[resource]: (none) → {`,
		"  ConfigMap/legacy-config: would be created\n",
		"  Deployment/taken: cannot be created: an object of this name is in the way, no controller owns it; the apply fails (",
		"and the Workspace turns Degraded, ChildNotCreated, until it is moved\n  Service/taken: would be created\n",
		"  ConfigMap/fresh-config: cannot be created: an object of this name is in the way, no controller owns it; the apply fails (",
		"ValidatingAdmissionPolicy 'formspec-workspace-children'",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff -n %s: no %q in\n%s", nsTakeover, want, r.stdout)
		}
	}
	for _, early := range []string{"ConfigMap/legacy: would be deleted", "Service/legacy:"} {
		if strings.Contains(r.stdout, early) {
			t.Errorf("diff: %q while the old pods still run (the original ConfigMap and Service wait for the rollout):\n%s", early, r.stdout)
		}
	}
	if got := deployment(); got.ResourceVersion != prepared.ResourceVersion {
		t.Errorf("diff wrote Deployment legacy")
	}
}

func managedBy(entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, e := range entries {
		if e.Manager == manager && e.Operation == op && e.Subresource == "" {
			return true
		}
	}
	return false
}

// waitForChildrenPolicy waits until the API server's admission refuses,
// by the children policy, a dry-run apply that would make a ConfigMap
// nobody owns a Workspace's child: a new policy takes a moment to apply.
func waitForChildrenPolicy(t *testing.T, c *controlplane.Client, ns string) {
	t.Helper()
	probe := controlplane.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "policy-probe", "namespace": ns}}
	if _, err := c.Create(probe); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete("v1", "ConfigMap", ns, "policy-probe") }()
	owned := controlplane.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "policy-probe", "namespace": ns,
		"ownerReferences": []any{map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "Workspace", "name": "probe", "uid": "00000000-0000-4000-8000-000000000001", "controller": true}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := c.DryRunApply(owned, metacontrollerManager)
		if err != nil && strings.Contains(err.Error(), "formspec-workspace-children") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the children policy does not refuse an apply onto a ConfigMap nobody owns after 30 s: %v", err)
		}
	}
}
