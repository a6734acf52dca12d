package workspace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

func TestMatchClaims(t *testing.T) {
	ws := &v1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "team-a"},
		Spec: v1alpha1.WorkspaceSpec{Datastores: []v1alpha1.DatastoreRef{
			{Name: "orders"}, {Name: "orders", Namespace: "team-a"}, {Name: "cache"}, {Name: "audit"},
		}},
	}
	claim := func(name, store string, conds ...metav1.Condition) *v1alpha1.ResourceClaim {
		c := &v1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Spec:       v1alpha1.ResourceClaimSpec{Workspace: "shop", Datastore: v1alpha1.DatastoreClaimRef{Name: store}},
			Status:     v1alpha1.ResourceClaimStatus{Conditions: conds},
		}
		if len(conds) > 0 && conds[0].Type == v1alpha1.ConditionReady && conds[0].Status == metav1.ConditionTrue {
			c.Status.Binding = &v1alpha1.Binding{Name: name + "-credentials"}
		}
		return c
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}
	denied := metav1.Condition{Type: v1alpha1.ConditionDenied, Status: metav1.ConditionTrue}
	a, b, c := claim("a-orders", "orders", denied), claim("b-orders", "orders", ready), claim("cache", "cache", denied)
	other := claim("audit", "audit", ready)
	other.Spec.Workspace = "another"

	got := MatchClaims(ws, []*v1alpha1.ResourceClaim{a, b, c, other})
	want := []DatastoreClaim{
		{Datastore: v1alpha1.DatastoreRef{Name: "orders"}, Claim: b, State: v1alpha1.DatastoreInjected},
		{Datastore: v1alpha1.DatastoreRef{Name: "cache"}, Claim: c, State: v1alpha1.DatastoreDenied},
		{Datastore: v1alpha1.DatastoreRef{Name: "audit"}, State: v1alpha1.DatastoreMissing},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MatchClaims: the Ready claim wins, a repeated entry counts once, another workspace's claim is not matched: -want, +got:\n%s", diff)
	}
}
