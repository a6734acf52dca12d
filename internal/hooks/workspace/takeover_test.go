package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

func TestDeploymentSelector(t *testing.T) {
	ours := &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelWorkspace: "acme"}}
	observedWith := func(sel *metav1.LabelSelector, template map[string]string) *observed {
		return &observed{deployment: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: sel,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template}}}}}
	}
	cases := map[string]struct {
		reason    string
		o         *observed
		wantSel   *metav1.LabelSelector
		wantCarry map[string]string
	}{
		"New": {
			reason:  "A workspace without a Deployment gets the hooks' selector.",
			o:       &observed{},
			wantSel: ours, wantCarry: ours.MatchLabels,
		},
		"Ours": {
			reason:  "The hooks' own Deployment keeps the selector it has, which is theirs.",
			o:       observedWith(ours, map[string]string{v1alpha1.LabelWorkspace: "acme", "team": "forms"}),
			wantSel: ours, wantCarry: ours.MatchLabels,
		},
		"Original": {
			reason:  "The original operator's Deployment keeps its own selector, immutable, and the pods carry its labels.",
			o:       observedWith(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "acme"}}, map[string]string{"app": "acme", "tier": "web"}),
			wantSel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "acme"}}, wantCarry: map[string]string{"app": "acme"},
		},
		"OriginalExpression": {
			reason: "A key only an expression names takes the value the observed pods carry.",
			o: observedWith(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"acme", "acme-canary"}}}},
				map[string]string{"app": "acme", "tier": "web"}),
			wantSel:   &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"acme", "acme-canary"}}}},
			wantCarry: map[string]string{"app": "acme"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel, carry := deploymentSelector(tc.o, ours)
			if diff := cmp.Diff(tc.wantSel, sel); diff != "" {
				t.Errorf("%s\nselector: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantCarry, carry); diff != "" {
				t.Errorf("%s\ncarried labels: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTakeoverOf(t *testing.T) {
	original := []childRef{{"Deployment", "acme"}, {"Service", "acme"}}
	ourDeployment := func(rolledOut bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2}
		if rolledOut {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		}
		return d
	}
	hold := map[string]string{v1alpha1.AnnotationTakeover: v1alpha1.TakeoverHold}
	pending := []binding{{status: v1alpha1.WorkspaceDatastoreStatus{State: v1alpha1.DatastorePending}}}
	injected := []binding{{status: v1alpha1.WorkspaceDatastoreStatus{State: v1alpha1.DatastoreInjected}}}
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		legacy      []childRef
		deployment  *appsv1.Deployment
		bindings    []binding
		want        *takeover
	}{
		"NothingOriginal": {
			reason: "A workspace whose children are all the hooks' has no takeover.",
			want:   nil,
		},
		"Held": {
			reason:      "The hold annotation keeps the original children as they are.",
			annotations: hold, legacy: original, bindings: injected,
			want: &takeover{legacy: original, held: heldByAnnotation},
		},
		"WaitingForCredentials": {
			reason: "A claim not verified yet keeps them too: the pods roll once, onto the credentials.",
			legacy: original, bindings: pending,
			want: &takeover{legacy: original, held: heldByCredentials},
		},
		"Released": {
			reason: "Without a hold and with every credential injected, the takeover goes on.",
			legacy: original, bindings: injected,
			want: &takeover{legacy: original},
		},
		"HoldTooLate": {
			reason:      "Once the Deployment has this version's template a hold changes nothing: the pods have rolled.",
			annotations: hold, legacy: []childRef{{"ConfigMap", "acme"}}, deployment: ourDeployment(false), bindings: pending,
			want: &takeover{legacy: []childRef{{"ConfigMap", "acme"}}, deploymentOurs: true},
		},
		"RolledOut": {
			reason: "The new template runs on every pod.",
			legacy: []childRef{{"ConfigMap", "acme"}}, deployment: ourDeployment(true),
			want: &takeover{legacy: []childRef{{"ConfigMap", "acme"}}, deploymentOurs: true, rolledOut: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &observed{ws: &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Annotations: tc.annotations}}, legacy: tc.legacy, deployment: tc.deployment}
			got := takeoverOf(o, tc.bindings)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(takeover{}, childRef{})); diff != "" {
				t.Errorf("%s\ntakeoverOf: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTakeoverRollsOnce follows the takeover fixtures, step by step, and
// checks the promise of docs/migrating.md that matters most: the pods roll
// once. Every step after the hold asks for the same pod template and
// selector, and a sync once the original children are gone asks for it
// again.
func TestTakeoverRollsOnce(t *testing.T) {
	steps := []string{"takeover-start", "takeover-rolling", "takeover-rolled-out", "takeover-service-switched"}
	h := New(Config{ResourceImage: "formahub/formspec-resource", DefaultVersion: "latest", ControlClusterURL: "http://formspec-ctl.formspec-system:7070"})
	var first *appsv1.Deployment
	var last *Request
	for _, step := range steps {
		req := fixtureRequest(t, step)
		dep := syncedDeployment(t, h, req)
		if first == nil {
			first = dep
		} else if diff := cmp.Diff(first.Spec.Template, dep.Spec.Template); diff != "" {
			t.Errorf("%s: the pod template differs from the first step's, a second rollout: -first, +here:\n%s", step, diff)
		}
		if diff := cmp.Diff(first.Spec.Selector, dep.Spec.Selector); diff != "" {
			t.Errorf("%s: the selector differs from the first step's: -first, +here:\n%s", step, diff)
		}
		last = req
	}
	// After the last step Metacontroller deletes the original ConfigMap:
	// the workspace then has only the hooks' children.
	var raw map[string]any
	if err := json.Unmarshal(last.body, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw["children"].(map[string]any)["ConfigMap.v1"].(map[string]any), "team-a/acme")
	body, _ := json.Marshal(raw)
	var done Request
	if err := done.Decode(body); err != nil {
		t.Fatal(err)
	}
	dep := syncedDeployment(t, h, &done)
	if diff := cmp.Diff(first.Spec.Template, dep.Spec.Template); diff != "" {
		t.Errorf("after the takeover: the pod template differs from the takeover's, a second rollout: -takeover, +after:\n%s", diff)
	}
	resp, err := h.Sync(context.Background(), &done)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.(*v1alpha1.WorkspaceStatus).Phase != v1alpha1.PhaseReady {
		t.Errorf("after the takeover: phase %s, want Ready", resp.Status.(*v1alpha1.WorkspaceStatus).Phase)
	}
}

func fixtureRequest(t *testing.T, name string) *Request {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", name, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req Request
	if err := req.Decode(body); err != nil {
		t.Fatal(err)
	}
	return &req
}

// syncedDeployment is the Deployment a sync asks for.
func syncedDeployment(t *testing.T, h *Hooks, req *Request) *appsv1.Deployment {
	t.Helper()
	resp, err := h.Sync(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.Children {
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var dep appsv1.Deployment
		if err := json.Unmarshal(raw, &dep); err != nil {
			t.Fatal(err)
		}
		if dep.Kind == "Deployment" && dep.Name == req.Parent.Metadata.Name {
			return &dep
		}
	}
	t.Fatal("the sync asks for no Deployment named after the workspace")
	return nil
}

func TestObservedPort(t *testing.T) {
	svc := func(ports ...portView) *serviceView {
		v := &serviceView{}
		v.Spec.Ports = ports
		return v
	}
	cases := map[string]struct {
		reason string
		svc    *serviceView
		want   *portView
	}{
		"None":     {reason: "A new workspace's Service gets the hooks' port.", svc: nil, want: nil},
		"Ours":     {reason: "The hooks' own port stays what it is.", svc: svc(portView{Name: "http", Port: 80, Protocol: "TCP"}), want: &portView{Name: "http", Port: 80, Protocol: "TCP"}},
		"Original": {reason: "The original operator's unnamed port keeps its name and number: a rename leaves kube-proxy without endpoints for a second.", svc: svc(portView{Port: 8080}), want: &portView{Port: 8080}},
		"Several":  {reason: "A Service of several ports is not guessed at: the hooks' port.", svc: svc(portView{Name: "a", Port: 80}, portView{Name: "b", Port: 81}), want: nil},
		"UDP":      {reason: "A UDP port is not the workspace's HTTP port.", svc: svc(portView{Port: 80, Protocol: "UDP"}), want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, observedPort(tc.svc)); diff != "" {
				t.Errorf("%s\nobservedPort: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
