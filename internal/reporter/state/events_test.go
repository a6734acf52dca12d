package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// reasons lists the reasons of evs, for compact expectations.
func reasons(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}

// TestWorkspaceEvents holds which workspace changes are announced.
func TestWorkspaceEvents(t *testing.T) {
	missing := []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonClusterClassNotFound, Message: `ClusterClass "gold" not found`}}
	degraded := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue, Reason: reason, Message: "the hook's message"}}
	}
	cases := map[string]struct {
		reason string
		prev   *observation.WorkspaceStatus
		cur    *observation.WorkspaceStatus
		want   []string
	}{
		"Steady": {
			reason: "nothing changed: nothing to say",
			prev:   &observation.WorkspaceStatus{Phase: "Ready"},
			cur:    &observation.WorkspaceStatus{Phase: "Ready"},
		},
		"RollingOut": {
			reason: "a new binary asked for and not yet running",
			prev:   &observation.WorkspaceStatus{Phase: "Ready", ArtifactHash: "h1", WantedArtifactHash: "h1"},
			cur:    &observation.WorkspaceStatus{Phase: "Progressing", ArtifactHash: "h1", WantedArtifactHash: "h2"},
			want:   []string{"Normal RollingOut"},
		},
		"RolledOut": {
			reason: "the rollout finishing is not a new rollout",
			prev:   &observation.WorkspaceStatus{Phase: "Progressing", ArtifactHash: "h1", WantedArtifactHash: "h2"},
			cur:    &observation.WorkspaceStatus{Phase: "Ready", ArtifactHash: "h2", WantedArtifactHash: "h2"},
		},
		"ScaledToZero": {
			reason: "Ready to Idle",
			prev:   &observation.WorkspaceStatus{Phase: "Ready"},
			cur:    &observation.WorkspaceStatus{Phase: "Idle", Idle: true},
			want:   []string{"Normal ScaledToZero"},
		},
		"Woken": {
			reason: "Idle to anything else",
			prev:   &observation.WorkspaceStatus{Phase: "Idle", Idle: true},
			cur:    &observation.WorkspaceStatus{Phase: "Progressing"},
			want:   []string{"Normal Woken"},
		},
		"FirstSeenIdle": {
			reason: "a reporter that only ever saw it idle saw no transition",
			cur:    &observation.WorkspaceStatus{Phase: "Idle", Idle: true},
		},
		"ClassMissing": {
			reason: "the class went missing",
			prev:   &observation.WorkspaceStatus{Phase: "Ready"},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: missing},
			want:   []string{"Warning ClusterClassNotFound"},
		},
		"ClassStillMissing": {
			reason: "announced once, not on every sync",
			prev:   &observation.WorkspaceStatus{Phase: "Degraded", Conditions: missing},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: missing},
		},
		"InvalidSpec": {
			reason: "a spec the hook cannot read",
			prev:   &observation.WorkspaceStatus{Phase: "Ready"},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonInvalidSpec)},
			want:   []string{"Warning InvalidSpec"},
		},
		"ProgressDeadlineExceeded": {
			reason: "a rollout stalled past its deadline",
			prev:   &observation.WorkspaceStatus{Phase: "Progressing"},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonProgressDeadlineExceeded)},
			want:   []string{"Warning ProgressDeadlineExceeded"},
		},
		"ReplicaFailure": {
			reason: "the Deployment cannot create pods",
			prev:   &observation.WorkspaceStatus{Phase: "Progressing"},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonReplicaFailure)},
			want:   []string{"Warning ReplicaFailure"},
		},
		"DatastoreNotInjected": {
			reason: "a datastore's claim denied or missing",
			prev:   &observation.WorkspaceStatus{Phase: "Ready"},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonDatastoreNotInjected)},
			want:   []string{"Warning DatastoreNotInjected"},
		},
		"FirstSeenDegraded": {
			reason: "a state is announced when this reporter first sees it",
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonReplicaFailure)},
			want:   []string{"Warning ReplicaFailure"},
		},
		"DegradedForAnotherReason": {
			reason: "still Degraded, for a new reason: the new reason is announced",
			prev:   &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonProgressDeadlineExceeded)},
			cur:    &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonDatastoreNotInjected)},
			want:   []string{"Warning DatastoreNotInjected"},
		},
		"StillDegraded": {
			reason: "the same reason again, whatever its message says now",
			prev:   &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonDatastoreNotInjected)},
			cur: &observation.WorkspaceStatus{Phase: "Degraded", Conditions: []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonDatastoreNotInjected, Message: "credentials not injected for two datastores"}}},
		},
		"Recovered": {
			reason: "Degraded turning False is not announced",
			prev:   &observation.WorkspaceStatus{Phase: "Degraded", Conditions: degraded(v1alpha1.ReasonReplicaFailure)},
			cur: &observation.WorkspaceStatus{Phase: "Ready", Conditions: []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionFalse,
				Reason: v1alpha1.ReasonAsExpected}}},
		},
		"TeardownStarted": {
			reason: "a deletion timestamp starts the teardown, and an idle workspace going away is not woken",
			prev:   &observation.WorkspaceStatus{Phase: "Idle", Idle: true},
			cur:    &observation.WorkspaceStatus{Phase: "Terminating", Idle: true, Terminating: true},
			want:   []string{"Normal TeardownStarted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var prev *wsFacts
			if tc.prev != nil {
				prev = new(factsOf(tc.prev))
			}
			got := reasons(workspaceEvents(workspaceRef(&wsEntry{name: types.NamespacedName{Namespace: "ns", Name: "shop"}}), prev, factsOf(tc.cur), tc.cur))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nevents (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestClaimEvents holds which claim decisions are announced.
func TestClaimEvents(t *testing.T) {
	now := t0
	granted := func(version string, since time.Time) *observation.ClaimDecision {
		return &observation.ClaimDecision{Namespace: "ns", Name: "c", Granted: true, Reason: "Verified", CredentialsVersion: version, Since: metav1.NewTime(since)}
	}
	denied := func(reason string, since time.Time) *observation.ClaimDecision {
		return &observation.ClaimDecision{Namespace: "ns", Name: "c", Reason: reason, Message: "why", Since: metav1.NewTime(since)}
	}
	exposed := func(c *observation.ClaimDecision) *observation.ClaimDecision {
		c.Exposed = &observation.Finding{Reason: v1alpha1.ReasonLastAppliedAnnotation, Message: "the Secret carries a copy"}
		return c
	}
	legacy := func(c *observation.ClaimDecision) *observation.ClaimDecision {
		c.LegacySignature = &observation.Finding{Reason: v1alpha1.ReasonSignatureV1, Message: "granted on a v1 signature"}
		return c
	}
	cases := map[string]struct {
		reason string
		prev   *claimEntry
		cur    *observation.ClaimDecision
		want   []string
	}{
		"FreshGrant": {
			reason: "first seen, decided a moment ago",
			cur:    granted("v1", now.Add(-time.Second)),
			want:   []string{"Normal ClaimGranted"},
		},
		"OldGrant": {
			reason: "first seen, decided long before this reporter started: announced then",
			cur:    granted("v1", now.Add(-time.Hour)),
		},
		"FreshDenial": {
			reason: "first seen, denied a moment ago",
			cur:    denied("SignatureInvalid", now.Add(-time.Second)),
			want:   []string{"Warning ClaimDenied"},
		},
		"Revoked": {
			reason: "granted, then denied",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1"},
			cur:    denied("Expired", now.Add(-time.Hour)),
			want:   []string{"Warning ClaimDenied"},
		},
		"DeniedForAnotherReason": {
			reason: "a new reason is a new decision",
			prev:   &claimEntry{reason: "DatastoreNotFound"},
			cur:    denied("SignatureInvalid", now.Add(-time.Hour)),
			want:   []string{"Warning ClaimDenied"},
		},
		"StillDenied": {
			reason: "the same denial again",
			prev:   &claimEntry{reason: "SignatureInvalid"},
			cur:    denied("SignatureInvalid", now.Add(-time.Hour)),
		},
		"Rotated": {
			reason: "still granted, other credentials",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1"},
			cur:    granted("v2", now.Add(-time.Hour)),
			want:   []string{"Normal CredentialsRotated"},
		},
		"Unchanged": {
			reason: "still granted, same credentials",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1"},
			cur:    granted("v1", now.Add(-time.Hour)),
		},
		"Exposed": {
			reason: "the credentials Secret is found carrying a copy of its data",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1"},
			cur:    exposed(granted("v1", now.Add(-time.Hour))),
			want:   []string{"Warning CredentialsExposed"},
		},
		"StillExposed": {
			reason: "announced once, not on every sync",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1", exposed: true},
			cur:    exposed(granted("v1", now.Add(-time.Hour))),
		},
		"FirstSeenExposed": {
			reason: "an exposure is a state, announced by a reporter that finds it, however old the grant",
			cur:    exposed(granted("v1", now.Add(-time.Hour))),
			want:   []string{"Warning CredentialsExposed"},
		},
		"LegacySignature": {
			reason: "a grant on a v1 signature is announced, however old, so a platform sees each one it has left",
			cur:    legacy(granted("v1", now.Add(-time.Hour))),
			want:   []string{"Warning LegacySignature"},
		},
		"StillLegacySignature": {
			reason: "announced once, not on every sync",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1", legacy: true},
			cur:    legacy(granted("v1", now.Add(-time.Hour))),
		},
		"SignedAgainAsV2": {
			reason: "the claim signed again as v2 loses the finding: nothing to announce",
			prev:   &claimEntry{granted: true, reason: "Verified", version: "v1", legacy: true},
			cur:    granted("v1", now.Add(-time.Hour)),
		},
		"FreshGrantExposed": {
			reason: "granted a moment ago and already exposed: both are said",
			cur:    exposed(granted("v1", now.Add(-time.Second))),
			want:   []string{"Normal ClaimGranted", "Warning CredentialsExposed"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, reasons(claimEvents(tc.cur, tc.prev, now))); diff != "" {
				t.Errorf("%s\nevents (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChildNotCreatedEventNamesTheChild feeds the status the workspace
// hook answers for a ConfigMap it could not create (the golden fixture's)
// to the reporter: the Warning Event it records carries the Degraded
// message whole, so that `kubectl events` names the object in the way and
// how to see its owner.
func TestChildNotCreatedEventNamesTheChild(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", "configmap-not-created", "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Status struct {
			Phase      string             `json:"phase"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	prev := &observation.WorkspaceStatus{Phase: v1alpha1.PhaseReady}
	cur := &observation.WorkspaceStatus{Phase: resp.Status.Phase, Conditions: resp.Status.Conditions}
	evs := workspaceEvents(workspaceRef(&wsEntry{name: types.NamespacedName{Namespace: "team-a", Name: "acme"}}), new(factsOf(prev)), factsOf(cur), cur)
	if diff := cmp.Diff([]string{"Warning " + v1alpha1.ReasonChildNotCreated}, reasons(evs)); diff != "" {
		t.Fatalf("events (-want, +got):\n%s", diff)
	}
	note := evs[0].Note
	for _, want := range []string{"ConfigMap team-a/acme-config", "kubectl get configmap acme-config -n team-a"} {
		if !strings.Contains(note, want) {
			t.Errorf("the Event's note does not say %q: %q", want, note)
		}
	}
	// The API server's limit on an Event's note, where the Event writer
	// would cut it.
	const maxNote = 1024
	if len(note) > maxNote || strings.HasSuffix(note, "…") {
		t.Errorf("the Event's note (%d bytes) is cut at the API's limit of %d: %q", len(note), maxNote, note)
	}
}
