package workspace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
)

// TestClaimsSource shows that each mode reads its own source and nothing
// else: related mode ignores a summary (without the admission policy it
// may be anyone's), summary mode ignores related claims, and an invalid
// summary's message stays short whatever the annotation holds.
func TestClaimsSource(t *testing.T) {
	readyClaim := claimObj("c1", "acme", "db", "", 1, 1, true, false)
	related, err := json.Marshal(readyClaim)
	if err != nil {
		t.Fatal(err)
	}
	ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a"},
		Spec: v1alpha1.WorkspaceSpec{Datastores: []v1alpha1.DatastoreRef{{Name: "db"}}}}
	readySummary := claimsummary.Encode(claimsummary.For(ws, []*v1alpha1.ResourceClaim{readyClaim}))
	cases := map[string]struct {
		reason     string
		claims     ClaimsSource
		annotation *string
		related    bool
		want       []v1alpha1.WorkspaceDatastoreStatus
		// degraded is the Degraded reason, and a part of its message.
		degraded, message string
	}{
		"SummaryReady": {
			reason:     "Summary mode injects the claim the summary names.",
			annotation: &readySummary,
			want:       []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreInjected, SecretName: "c1-credentials"}},
			degraded:   v1alpha1.ReasonAsExpected,
		},
		"SummaryIgnoresRelated": {
			reason:   "Summary mode does not inject a related claim: without a summary the entry waits.",
			related:  true,
			want:     []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", State: v1alpha1.DatastorePending}},
			degraded: v1alpha1.ReasonAsExpected,
		},
		"RelatedIgnoresSummary": {
			reason:     "Related mode does not read the annotation, which only the admission policy makes the reporter's.",
			claims:     ClaimsRelated,
			annotation: &readySummary,
			want:       []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", State: v1alpha1.DatastoreMissing}},
			degraded:   v1alpha1.ReasonDatastoreNotInjected,
		},
		"RelatedReady": {
			reason:   "Related mode injects the related claim.",
			claims:   ClaimsRelated,
			related:  true,
			want:     []v1alpha1.WorkspaceDatastoreStatus{{Name: "db", Claim: "c1", State: v1alpha1.DatastoreInjected, SecretName: "c1-credentials"}},
			degraded: v1alpha1.ReasonAsExpected,
		},
		"InvalidBounded": {
			reason:     "A summary that does not parse is Degraded with the reason, its message bounded.",
			annotation: ptr.To(`{"claims":[{"name":"` + strings.Repeat("x", 60000) + `","datastore":{"name":"db","namespace":"team-a"},"state":"Pending"}]}`),
			degraded:   v1alpha1.ReasonInvalidClaimsSummary,
			message:    "annotation formspec.dev/claims: invalid claims summary: claim 0: name",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			annotations := map[string]string{}
			if tc.annotation != nil {
				annotations[claimsummary.Annotation] = *tc.annotation
			}
			parent := map[string]any{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace",
				"metadata": map[string]any{"name": "acme", "namespace": "team-a", "annotations": annotations},
				"spec":     map[string]any{"clusterClass": "gold", "datastores": []any{map[string]any{"name": "db"}}}}
			rel := map[string]any{"ClusterClass.formspec.dev/v1alpha1": map[string]any{"gold": map[string]any{
				"metadata": map[string]any{"name": "gold"}, "spec": map[string]any{"scaling": map[string]any{"minReplicas": 1}}}}}
			if tc.related {
				rel["ResourceClaim.formspec.dev/v1alpha1"] = map[string]any{"team-a/c1": json.RawMessage(related)}
			}
			body, err := json.Marshal(map[string]any{"parent": parent, "children": map[string]any{}, "related": rel})
			if err != nil {
				t.Fatal(err)
			}
			var req Request
			if err := req.Decode(body); err != nil {
				t.Fatal(err)
			}
			resp, err := New(Config{DefaultVersion: "1.0.0", Claims: tc.claims}).Sync(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			st := resp.Status.(*v1alpha1.WorkspaceStatus)
			if diff := cmp.Diff(tc.want, st.Datastores); diff != "" {
				t.Errorf("%s\nstatus.datastores: -want, +got:\n%s", tc.reason, diff)
			}
			d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
			if d == nil || d.Reason != tc.degraded || !strings.Contains(d.Message, tc.message) {
				t.Fatalf("%s\nDegraded: got %+v, want reason %s with %q", tc.reason, d, tc.degraded, tc.message)
			}
			if len(d.Message) > 2*maxSummaryMessage {
				t.Errorf("%s\nDegraded message of %d bytes, want at most about %d", tc.reason, len(d.Message), maxSummaryMessage)
			}
		})
	}
}
