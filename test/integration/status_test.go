package integration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testStatus checks the status schemas the way the hooks write them: a
// status as the Go types encode it is accepted unchanged through the status
// subresource, and malformed ones are rejected.
func testStatus(t *testing.T, c *controlplane.Client) {
	ensureNamespace(t, c, "status")
	ws := jsonCopy(t, fullWorkspace()).(map[string]any)
	ws = with(t, ws, fields{"metadata": map[string]any{"name": "acme", "namespace": "status"}})
	ds := with(t, controlplane.Object{
		"apiVersion": v1alpha1.APIVersion, "kind": "Datastore",
		"metadata": map[string]any{"name": "orders", "namespace": "status"},
		"spec":     map[string]any{"driver": "postgres", "endpointSecretRef": map[string]any{"name": "orders"}, "ownerPublicKey": testKey},
	}, nil)
	rc := with(t, controlplane.Object{
		"apiVersion": v1alpha1.APIVersion, "kind": "ResourceClaim",
		"metadata": map[string]any{"name": "acme-orders", "namespace": "status"},
		"spec": map[string]any{
			"datastore": map[string]any{"name": "orders"}, "workspace": "acme", "permission": "read",
			"grantedBy": "dba@example.com", "grantedAt": "2026-01-02T15:04:05Z", "signature": testSignature,
		},
	}, nil)
	for _, obj := range []controlplane.Object{ws, ds, rc} {
		if _, err := c.Create(obj); err != nil {
			t.Fatalf("cannot create %s: %v", obj["kind"], err)
		}
	}

	at := metav1.NewTime(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC))
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: at, Reason: "Available", Message: "2 of 2 replicas are ready"}
	wsStatus := jsonCopy(t, v1alpha1.WorkspaceStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseDegraded,
		Conditions: []metav1.Condition{ready,
			{Type: "Progressing", Status: metav1.ConditionFalse, LastTransitionTime: at, Reason: "Complete", Message: ""},
			{Type: "Degraded", Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "ClaimDenied", Message: "claim acme-orders is denied"},
		},
		Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2,
		ServiceName:  "acme",
		ArtifactHash: "sha256:0f1e",
		Datastores: []v1alpha1.WorkspaceDatastoreStatus{
			{Name: "orders", Claim: "acme-orders", State: v1alpha1.DatastoreInjected, SecretName: "acme-orders-credentials"},
			{Name: "orders", State: v1alpha1.DatastoreMissing},
		},
	})
	dsStatus := jsonCopy(t, v1alpha1.DatastoreStatus{
		ObservedGeneration: 3,
		Conditions: []metav1.Condition{
			{Type: "Validated", Status: metav1.ConditionFalse, LastTransitionTime: at, Reason: "SecretNotLabeled", Message: "Secret orders lacks the label formspec.dev/datastore=orders"},
			{Type: "Denied", Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "SecretNotLabeled", Message: "Secret orders lacks the label formspec.dev/datastore=orders"},
		},
		Endpoint: "orders.db.svc:5432",
	})
	rcStatus := jsonCopy(t, v1alpha1.ResourceClaimStatus{
		ObservedGeneration: 1,
		Conditions:         []metav1.Condition{ready},
		Binding:            &v1alpha1.Binding{Name: "acme-orders-credentials"},
		CredentialsHash:    "sha256:9a8b",
	})
	object := func(base controlplane.Object, status any) controlplane.Object {
		return with(t, controlplane.Object{"apiVersion": base["apiVersion"], "kind": base["kind"], "metadata": base["metadata"]}, fields{"status": status})
	}
	withStatus := func(status any, changes fields) any {
		return with(t, status.(map[string]any), changes)
	}
	badCondition := func(changes fields) any {
		return []any{with(t, jsonCopy(t, ready).(map[string]any), changes)}
	}

	cases := map[string]struct {
		reason   string
		obj      controlplane.Object
		wantErrs []string
	}{
		"WorkspaceGoType": {
			reason: "A WorkspaceStatus with every field set, as the Go type encodes it, is accepted unchanged.",
			obj:    object(ws, wsStatus),
		},
		"DatastoreGoType": {
			reason: "A DatastoreStatus with every field set is accepted unchanged.",
			obj:    object(ds, dsStatus),
		},
		"ResourceClaimGoType": {
			reason: "A ResourceClaimStatus with every field set is accepted unchanged.",
			obj:    object(rc, rcStatus),
		},
		"UnknownPhase": {
			reason:   "phase is one of the documented phases.",
			obj:      object(ws, withStatus(wsStatus, fields{"phase": "Broken"})),
			wantErrs: []string{`status.phase: Unsupported value: "Broken"`},
		},
		"UnknownDatastoreState": {
			reason:   "A datastore entry's state is Injected, Pending, Denied or Missing.",
			obj:      object(ws, withStatus(wsStatus, fields{"datastores": []any{map[string]any{"name": "orders", "state": "Maybe"}}})),
			wantErrs: []string{`status.datastores[0].state: Unsupported value: "Maybe"`},
		},
		"DuplicateConditionType": {
			reason:   "conditions is a map keyed by type.",
			obj:      object(rc, withStatus(rcStatus, fields{"conditions": []any{jsonCopy(t, ready), jsonCopy(t, ready)}})),
			wantErrs: []string{"status.conditions[1]", "Duplicate value"},
		},
		"ConditionWithoutReason": {
			reason:   "A condition has the metav1.Condition shape: reason is required.",
			obj:      object(rc, withStatus(rcStatus, fields{"conditions": badCondition(fields{"reason": remove{}})})),
			wantErrs: []string{"status.conditions[0].reason: Required value"},
		},
		"ConditionBadStatus": {
			reason:   "A condition's status is True, False or Unknown.",
			obj:      object(ds, withStatus(dsStatus, fields{"conditions": badCondition(fields{"status": "Yes"})})),
			wantErrs: []string{`status.conditions[0].status: Unsupported value: "Yes"`},
		},
		"ConditionBadTime": {
			reason:   "lastTransitionTime is a date-time.",
			obj:      object(ds, withStatus(dsStatus, fields{"conditions": badCondition(fields{"lastTransitionTime": "yesterday"})})),
			wantErrs: []string{"status.conditions[0].lastTransitionTime", "date-time"},
		},
		"BindingWithoutName": {
			reason:   "A binding names its Secret.",
			obj:      object(rc, withStatus(rcStatus, fields{"binding": map[string]any{}})),
			wantErrs: []string{"status.binding.name: Required value"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := c.DryRunUpdateStatus(tc.obj)
			if len(tc.wantErrs) > 0 {
				checkRejected(t, tc.reason, err, tc.wantErrs)
				return
			}
			if err != nil {
				t.Fatalf("%s\nDryRunUpdateStatus(...): want accepted, got %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.obj["status"], got["status"]); diff != "" {
				t.Errorf("%s\nDryRunUpdateStatus(...) status: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
