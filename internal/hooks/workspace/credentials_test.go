package workspace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
)

func claimObj(name, ws, store, storeNS string, gen, observedGen int64, ready, denied bool) *v1alpha1.ResourceClaim {
	c := &v1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Generation: gen},
		Spec:       v1alpha1.ResourceClaimSpec{Workspace: ws, Datastore: v1alpha1.DatastoreClaimRef{Name: store, Namespace: storeNS}},
		Status:     v1alpha1.ResourceClaimStatus{ObservedGeneration: observedGen},
	}
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status(ready)}, {Type: "Denied", Status: status(denied)}}
	if ready {
		c.Status.Binding = &v1alpha1.Binding{Name: name + "-credentials"}
		c.Status.CredentialsHash = "sha256:" + name
	}
	return c
}

func TestBindingsFor(t *testing.T) {
	cases := map[string]struct {
		reason string
		refs   []v1alpha1.DatastoreRef
		claims []*v1alpha1.ResourceClaim
		want   []v1alpha1.WorkspaceDatastoreStatus
	}{
		"Injected": {
			reason: "A current, ready claim for this workspace and datastore is injected.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 1, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreInjected, SecretName: "c1-credentials"}},
		},
		"OtherWorkspace": {
			reason: "A claim for another workspace in the same namespace does not count.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "globex", "db", "", 1, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", State: v1alpha1.DatastoreMissing}},
		},
		"OtherDatastoreNamespace": {
			reason: "The datastore namespace must match, defaulting to the workspace's.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db", Namespace: "shared"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 1, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", State: v1alpha1.DatastoreMissing}},
		},
		"BeingReverified": {
			reason: "A claim edited since its last Ready verdict stays injected while it is re-verified, so the pods do not roll twice.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 2, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreInjected, SecretName: "c1-credentials"}},
		},
		"NotYetVerified": {
			reason: "A claim the resourceclaim hook has not judged yet is pending.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 1, 0, false, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastorePending}},
		},
		"Deleting": {
			reason: "A claim being deleted is not injected.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{func() *v1alpha1.ResourceClaim {
				c := claimObj("c1", "acme", "db", "", 1, 1, true, false)
				c.DeletionTimestamp = &metav1.Time{}
				return c
			}()},
			want: []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastorePending}},
		},
		"Denied": {
			reason: "A denied claim is reported as denied and not injected.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 1, 1, false, true)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreDenied}},
		},
		"SameDatastoreTwice": {
			reason: "An entry naming the workspace's namespace and one leaving it out are one datastore: injected once.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db", EnvPrefix: "A_"}, {Name: "db", Namespace: "team-a", EnvPrefix: "B_"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("c1", "acme", "db", "", 1, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreInjected, SecretName: "c1-credentials"}},
		},
		"ReadyWinsOverDenied": {
			reason: "With several claims, a ready one is chosen whatever the names' order.",
			refs:   []v1alpha1.DatastoreRef{{Name: "db"}},
			claims: []*v1alpha1.ResourceClaim{claimObj("a-old", "acme", "db", "", 1, 1, false, true), claimObj("b-new", "acme", "db", "", 1, 1, true, false)},
			want:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "b-new", State: v1alpha1.DatastoreInjected, SecretName: "b-new-credentials"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a"}, Spec: v1alpha1.WorkspaceSpec{Datastores: tc.refs}}
			var got []v1alpha1.WorkspaceDatastoreStatus
			for _, b := range bindingsFor(ws, tc.claims) {
				got = append(got, b.status)
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nbindingsFor: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCredentialsHash(t *testing.T) {
	injected := func(claim, hash string) binding {
		return binding{status: v1alpha1.WorkspaceDatastoreStatus{Claim: claim, State: v1alpha1.DatastoreInjected}, hash: hash}
	}
	none := credentialsHash([]binding{{status: v1alpha1.WorkspaceDatastoreStatus{State: v1alpha1.DatastorePending}}})
	if none != "" {
		t.Errorf("nothing injected: got %q, want no hash (no annotation)", none)
	}
	a := credentialsHash([]binding{injected("c1", "sha256:aa")})
	b := credentialsHash([]binding{injected("c1", "sha256:bb")})
	if a == "" || a == b {
		t.Errorf("a rotated credential must change the hash: %q vs %q", a, b)
	}
	if again := credentialsHash([]binding{injected("c1", "sha256:aa")}); again != a {
		t.Errorf("the hash must be stable: %q vs %q", a, again)
	}
}

// TestClaimsInSkipsBroken shows that one claim that does not decode does not
// hide the others (nor fail the request).
func TestClaimsInSkipsBroken(t *testing.T) {
	related := map[string]json.RawMessage{
		"team-a/broken": json.RawMessage(`{"metadata":{"name":"broken","namespace":"team-a"},"spec":{"workspace":7}}`),
		"team-a/good":   json.RawMessage(`{"metadata":{"name":"good","namespace":"team-a"},"spec":{"workspace":"acme"}}`),
		"team-a/gone":   json.RawMessage(`null`),
	}
	got := claimsIn(related)
	if len(got) != 1 || got[0].Name != "good" {
		t.Errorf("claimsIn: got %d claims (%v), want only the good one", len(got), got)
	}
}

// TestSummaryRoundTrip shows that the hook reaches the same decision about
// every datastore entry from the reporter's summary of the claims as from
// the claims themselves: for claim sets drawn at random (of this
// workspace and another, for its datastores and others, ready, denied,
// pending or going away, one datastore written twice), bindingsFor over
// the summary's claims equals bindingsFor over the claims.
func TestSummaryRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 2))
	stores := []string{"db", "cache", "logs", "gone"}
	for i := range 500 {
		ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a"}}
		for _, s := range stores[:rng.IntN(len(stores))] {
			ref := v1alpha1.DatastoreRef{Name: s}
			if rng.IntN(4) == 0 {
				ref.Namespace = "shared"
			}
			ws.Spec.Datastores = append(ws.Spec.Datastores, ref)
		}
		if n := len(ws.Spec.Datastores); n > 0 && rng.IntN(3) == 0 {
			twice := ws.Spec.Datastores[rng.IntN(n)]
			twice.Namespace = cmp.Or(twice.Namespace, "team-a")
			ws.Spec.Datastores = append(ws.Spec.Datastores, twice)
		}
		var claims []*v1alpha1.ResourceClaim
		for j := range rng.IntN(8) {
			storeNS := []string{"", "team-a", "shared"}[rng.IntN(3)]
			ready, denied := rng.IntN(2) == 0, rng.IntN(3) == 0
			c := claimObj(fmt.Sprintf("c%d-%d", j, rng.IntN(100)), []string{"acme", "acme", "globex"}[rng.IntN(3)],
				stores[rng.IntN(len(stores))], storeNS, 1, 1, ready, denied && !ready)
			if rng.IntN(8) == 0 {
				c.DeletionTimestamp = &metav1.Time{}
			}
			claims = append(claims, c)
		}
		want := bindingsFor(ws, claims)
		summary, err := claimsummary.Parse(claimsummary.Encode(claimsummary.For(ws, claims)))
		if err != nil {
			t.Fatalf("set %d: the summary does not parse: %v", i, err)
		}
		got := bindingsFor(ws, summary.ResourceClaims(ws))
		if diff := gocmp.Diff(want, got, gocmp.AllowUnexported(binding{})); diff != "" {
			t.Fatalf("set %d (workspace %+v, %d claims): bindings from the summary differ, -related, +summary:\n%s", i, ws.Spec.Datastores, len(claims), diff)
		}
	}
}
