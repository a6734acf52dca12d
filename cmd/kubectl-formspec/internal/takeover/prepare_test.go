package takeover

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

const uid = "6f1c2f0e-3b7a-4d52-9c1e-0d6a1f2b3c4d"

// entry is a managed fields entry owning the given fields.
func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// ownerFields are the fields of a manager that wrote the owner reference
// to the Workspace, and a container.
const ownerFields = `{"f:metadata":{"f:labels":{".":{},"f:app":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + uid + `\"}":{}}},` +
	`"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"workspace\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`

func child(labels map[string]string, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("apps/v1")
	obj.SetKind("Deployment")
	obj.SetNamespace("team-a")
	obj.SetName("acme")
	obj.SetResourceVersion("4711")
	obj.SetLabels(labels)
	obj.SetManagedFields(entries)
	return obj
}

func TestOriginalManagers(t *testing.T) {
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		want   []string
	}{
		"Operator": {
			reason: "The manager that wrote the owner reference with an update is the original operator.",
			obj: child(nil, entry("formspec-operator", metav1.ManagedFieldsOperationUpdate, "", ownerFields),
				entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}}}`),
				entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:replicas":{}}}`)),
			want: []string{"formspec-operator"},
		},
		"NotMetacontroller": {
			reason: "Metacontroller's own entry is never moved to itself.",
			obj:    child(nil, entry("metacontroller", metav1.ManagedFieldsOperationUpdate, "", ownerFields)),
			want:   nil,
		},
		"NotApply": {
			reason: "An applier's entry is not a client-side manager: csaupgrade moves updates only.",
			obj:    child(nil, entry("formspec-operator", metav1.ManagedFieldsOperationApply, "", ownerFields)),
			want:   nil,
		},
		"OtherOwner": {
			reason: "A manager that wrote an owner reference to something else is not the Workspace's operator.",
			obj:    child(nil, entry("argocd", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"other\"}":{}}}}`)),
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := originalManagers(tc.obj, uid, "metacontroller")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\noriginalManagers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPreparePatch(t *testing.T) {
	opts := PrepareOptions{FieldManager: "metacontroller"}
	operator := entry("formspec-operator", metav1.ManagedFieldsOperationUpdate, "", ownerFields)
	cases := map[string]struct {
		reason       string
		obj          *unstructured.Unstructured
		wantLabelled bool
		wantMoved    []string
		// wantManagers are the managers of the patched managed fields,
		// nil when none are patched; wantNoPatch: nothing to do.
		wantManagers []string
		wantNoPatch  bool
	}{
		"Original": {
			reason:       "An original child gets the label, and the operator's fields move to an Apply entry of Metacontroller's.",
			obj:          child(map[string]string{"app": "acme"}, operator),
			wantLabelled: true, wantMoved: []string{"formspec-operator"}, wantManagers: []string{"metacontroller"},
		},
		"NoLabels": {
			reason:       "A child without labels gets a labels map.",
			obj:          child(nil, operator),
			wantLabelled: true, wantMoved: []string{"formspec-operator"}, wantManagers: []string{"metacontroller"},
		},
		"Done": {
			reason:      "A prepared child is left alone: running prepare again changes nothing.",
			obj:         child(map[string]string{"controller-uid": uid}, entry("metacontroller", metav1.ManagedFieldsOperationApply, "", ownerFields)),
			wantNoPatch: true,
		},
		"LabelOnly": {
			reason:       "A child whose managers are unknown is still labelled.",
			obj:          child(nil),
			wantLabelled: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			patch, labelled, moved, err := preparePatch(opts, uid, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNoPatch {
				if patch != nil {
					t.Errorf("%s\nwant no patch, got %s", tc.reason, patch)
				}
				return
			}
			if labelled != tc.wantLabelled {
				t.Errorf("%s\nlabelled %v, want %v", tc.reason, labelled, tc.wantLabelled)
			}
			if diff := cmp.Diff(tc.wantMoved, moved); diff != "" {
				t.Errorf("%s\nmoved: -want, +got:\n%s", tc.reason, diff)
			}
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			var managers []string
			sawVersion, sawLabel := false, false
			for _, op := range ops {
				switch op.Path {
				case "/metadata/resourceVersion":
					sawVersion = string(op.Value) == `"4711"`
				case "/metadata/managedFields":
					var entries []metav1.ManagedFieldsEntry
					if err := json.Unmarshal(op.Value, &entries); err != nil {
						t.Fatal(err)
					}
					for _, e := range entries {
						managers = append(managers, e.Manager)
						if e.Manager == "metacontroller" && e.Operation != metav1.ManagedFieldsOperationApply {
							t.Errorf("%s\nMetacontroller's entry is an %s, want Apply", tc.reason, e.Operation)
						}
					}
				case "/metadata/labels/controller-uid":
					sawLabel = string(op.Value) == `"`+uid+`"`
				case "/metadata/labels":
					sawLabel = string(op.Value) == `{"controller-uid":"`+uid+`"}`
				}
			}
			if !sawVersion {
				t.Errorf("%s\nthe patch does not pin the resourceVersion it was computed from: %s", tc.reason, patch)
			}
			if sawLabel != tc.wantLabelled {
				t.Errorf("%s\nthe patch labels: %v, want %v: %s", tc.reason, sawLabel, tc.wantLabelled, patch)
			}
			if diff := cmp.Diff(tc.wantManagers, managers); diff != "" {
				t.Errorf("%s\nmanagers after the patch: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestConflicts(t *testing.T) {
	ws := &unstructured.Unstructured{}
	ws.SetName("acme")
	ws.SetUID(uid)
	yes := true
	obj := func(kind, name string, refs ...metav1.OwnerReference) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetKind(kind)
		o.SetNamespace("team-a")
		o.SetName(name)
		o.SetOwnerReferences(refs)
		return o
	}
	got := conflicts(ws, []*unstructured.Unstructured{
		obj("Deployment", "acme"),
		obj("Service", "acme", metav1.OwnerReference{Kind: "HelmRelease", Name: "shop", UID: "other", Controller: &yes, APIVersion: "helm.toolkit.fluxcd.io/v2"}),
		obj("ConfigMap", "acme-config", metav1.OwnerReference{Kind: "Workspace", Name: "acme", UID: uid, Controller: &yes}),
		obj("ConfigMap", "acme", metav1.OwnerReference{Kind: "HelmRelease", Name: "shop", UID: "other", Controller: &yes}),
	})
	want := []string{
		"Deployment team-a/acme: no controller owns it",
		"Service team-a/acme: controlled by HelmRelease shop (helm.toolkit.fluxcd.io/v2)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects at the children's names that are not the Workspace's: -want, +got:\n%s", diff)
	}
}

func TestStateOf(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "m"}
	}
	cases := map[string]struct {
		reason       string
		generation   int64
		st           v1alpha1.WorkspaceStatus
		wantDone     bool
		wantDegraded bool
	}{
		"TakenOver": {
			reason: "Ready, settled, of the current generation: taken over.", generation: 1,
			st:       v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseReady, Conditions: []metav1.Condition{cond("Progressing", metav1.ConditionFalse, "RolloutComplete")}},
			wantDone: true,
		},
		"IdleTakenOver": {
			reason: "An idle workspace is taken over once settled too.", generation: 1,
			st:       v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseIdle, Conditions: []metav1.Condition{cond("Progressing", metav1.ConditionFalse, "RolloutComplete")}},
			wantDone: true,
		},
		"StillHeld": {
			reason: "The status from before the release says held: not done.", generation: 1,
			st: v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseIdle, Conditions: []metav1.Condition{cond("Progressing", metav1.ConditionTrue, "TakeoverHeld")}},
		},
		"OriginalsLeft": {
			reason: "Ready pods but original children left: not done.", generation: 1,
			st: v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseProgressing, Conditions: []metav1.Condition{cond("Progressing", metav1.ConditionTrue, "TakingOver")}},
		},
		"OldGeneration": {
			reason: "A status of an older generation says nothing yet.", generation: 2,
			st: v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseReady, Conditions: []metav1.Condition{cond("Progressing", metav1.ConditionFalse, "RolloutComplete")}},
		},
		"Degraded": {
			reason: "Degraded stops the roll.", generation: 1,
			st:           v1alpha1.WorkspaceStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseDegraded, Conditions: []metav1.Condition{cond("Degraded", metav1.ConditionTrue, "DatastoreNotInjected")}},
			wantDegraded: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetGeneration(tc.generation)
			s := stateOf(obj, &tc.st)
			if s.done != tc.wantDone || (s.degraded != "") != tc.wantDegraded {
				t.Errorf("%s\ndone %v degraded %q, want done %v degraded %v", tc.reason, s.done, s.degraded, tc.wantDone, tc.wantDegraded)
			}
		})
	}
}
