package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestDirectives holds the one rule for directives: when one is written
// onto its Workspace and when it is reported consumed.
func TestDirectives(t *testing.T) {
	h1, h2 := digest(1), digest(2)
	restart := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: h2}
	idle := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	wake := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionWake}
	cases := map[string]struct {
		reason       string
		ws           *observation.WorkspaceStatus
		directive    ccapi.Directive
		wantWrite    bool
		wantConsumed *ccapi.DirectiveConsumed
	}{
		"RestartNotAnnotated": {
			reason:    "the annotation is missing: write it",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: h1},
			directive: restart,
			wantWrite: true,
		},
		"RestartRolling": {
			reason:    "annotated but the pods still run the old hash: nothing to write, not consumed yet",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Progressing", ArtifactHash: h1, WantedArtifactHash: h2},
			directive: restart,
		},
		"RestartDone": {
			reason:       "the pods run the hash: consumed (this also covers a lost consumption report)",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: h2, WantedArtifactHash: h2},
			directive:    restart,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionRestartRequired, ArtifactHash: h2},
		},
		"IdleNotYet": {
			reason:    "no formspec.dev/idle yet: write it",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready"},
			directive: idle,
			wantWrite: true,
		},
		"IdleDone": {
			reason:       "annotated: consumed, whether or not the class lets it scale to zero",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", Idle: true},
			directive:    idle,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionIdle},
		},
		"WakeNotYet": {
			reason:    "still idle: remove the annotation",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Idle", Idle: true},
			directive: wake,
			wantWrite: true,
		},
		"WakeDone": {
			reason:       "not idle: consumed",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready"},
			directive:    wake,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionWake},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
			st.ObserveWorkspace(tc.ws, t0)
			p, _ := st.Next()
			st.Done(p, true, t0)
			st.SetDirectives([]ccapi.Directive{tc.directive}, t0.Add(time.Second))
			var wantWrites []ccapi.Directive
			if tc.wantWrite {
				wantWrites = []ccapi.Directive{tc.directive}
			}
			plan := st.ToWrite(t0)
			if diff := cmp.Diff(wantWrites, plan.Write); diff != "" {
				t.Errorf("%s\nto write (-want, +got):\n%s", tc.reason, diff)
			}
			if len(plan.Refused) != 0 {
				t.Errorf("%s\nrefused: %v", tc.reason, plan.Refused)
			}
			var got *ccapi.DirectiveConsumed
			if p, ok := st.Next(); ok {
				var rep ccapi.WorkspaceStatusReport
				if err := json.Unmarshal(p.Body, &rep); err != nil {
					t.Fatal(err)
				}
				got = rep.DirectiveConsumed
			}
			if diff := cmp.Diff(tc.wantConsumed, got); diff != "" {
				t.Errorf("%s\nconsumed (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDirectiveRefusals checks what the reporter refuses to write: a
// Directive for a Workspace the hook server has not synced, for a
// namespace it serves no Workspace in, or with a malformed hash. Each is
// refused once, not on every poll, and nothing of it is written; one that
// waited only for its Workspace to be synced is written once it is.
func TestDirectiveRefusals(t *testing.T) {
	restart := func(ns, name, hash string) ccapi.Directive {
		return ccapi.Directive{Namespace: ns, Name: name, Action: ccapi.ActionRestartRequired, ArtifactHash: hash}
	}
	cases := map[string]struct {
		reason    string
		directive ccapi.Directive
		// deleted is a workspace whose teardown the reporter saw.
		deleted    string
		wantReason string
		// syncedLater: the workspace is synced after the Refusal, and the
		// directive must then be written.
		syncedLater bool
	}{
		"UnknownWorkspace": {
			reason:      "the hook server has synced no Workspace shop-2 in ns (yet): a forged name, or a workspace synced by the other replica so far",
			directive:   restart("ns", "shop-2", digest(2)),
			wantReason:  RefuseUnknownWorkspace,
			syncedLater: true,
		},
		"UnknownIdle": {
			reason:     "an idle names a workspace too",
			directive:  ccapi.Directive{Namespace: "ns", Name: "shop-2", Action: ccapi.ActionIdle},
			wantReason: RefuseUnknownWorkspace,
		},
		"DeletedWorkspace": {
			reason:     "a workspace whose teardown finished is not one the reporter serves any more",
			directive:  restart("ns", "gone", digest(2)),
			deleted:    "gone",
			wantReason: RefuseUnknownWorkspace,
		},
		"ForeignNamespace": {
			reason:     "no Workspace of kube-system was ever synced: the install does not serve it",
			directive:  restart("kube-system", "shop", digest(2)),
			wantReason: RefuseForeignNamespace,
		},
		"ForeignWake": {
			reason:     "a wake is checked like the rest",
			directive:  ccapi.Directive{Namespace: "team-b", Name: "blog", Action: ccapi.ActionWake},
			wantReason: RefuseForeignNamespace,
		},
		"ShortHash": {
			reason:     "a prefix of a digest is no digest",
			directive:  restart("ns", "shop", "sha256:9b2c"),
			wantReason: RefuseInvalidHash,
		},
		"UppercaseHash": {
			reason:     "one spelling per digest: the same binary in capitals would roll the workspace again",
			directive:  restart("ns", "shop", strings.ToUpper(digest(2))),
			wantReason: RefuseInvalidHash,
		},
		"HashWithoutAlgorithm": {
			reason:     "the hash says what it is a hash of",
			directive:  restart("ns", "shop", strings.TrimPrefix(digest(2), "sha256:")),
			wantReason: RefuseInvalidHash,
		},
		"HashWithText": {
			reason:     "nothing but a digest reaches the pod template",
			directive:  restart("ns", "shop", digest(2)+"; rm -rf /"),
			wantReason: RefuseInvalidHash,
		},
		"UnknownAction": {
			reason:     "an action this reporter does not know is not carried out",
			directive:  ccapi.Directive{Namespace: "ns", Name: "shop", Action: "delete"},
			wantReason: RefuseInvalid,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
			st.ObserveWorkspace(wsStatus("shop", "Ready", digest(1)), t0)
			if tc.deleted != "" {
				st.ObserveWorkspace(wsStatus(tc.deleted, "Ready", digest(1)), t0)
				st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: tc.deleted}, t0)
			}
			want := []Refusal{{Directive: tc.directive, Reason: tc.wantReason}}
			for poll := range 3 {
				st.SetDirectives([]ccapi.Directive{tc.directive}, t0.Add(time.Duration(poll)*time.Minute))
				plan := st.ToWrite(t0)
				if len(plan.Write) != 0 {
					t.Errorf("%s\npoll %d wrote %v", tc.reason, poll, plan.Write)
				}
				if diff := cmp.Diff(want, plan.Refused, cmp.AllowUnexported(Refusal{}), cmpopts.IgnoreFields(Refusal{}, "told"), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\npoll %d: refused (-want, +got):\n%s", tc.reason, poll, diff)
				}
				// Reported once.
				want = nil
			}
			if !tc.syncedLater {
				return
			}
			st.ObserveWorkspace(wsStatus(tc.directive.Name, "Ready", digest(1)), t0.Add(time.Hour))
			st.SetDirectives([]ccapi.Directive{tc.directive}, t0.Add(time.Hour))
			if diff := cmp.Diff([]ccapi.Directive{tc.directive}, st.ToWrite(t0).Write); diff != "" {
				t.Errorf("once the workspace is synced: to write (-want, +got):\n%s", diff)
			}
		})
	}
}

// TestDirectiveWrittenOnce checks that a directive is written once, not on
// every poll, and that withdrawing it writes nothing.
func TestDirectiveWrittenOnce(t *testing.T) {
	st := New(Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	st.ObserveWorkspace(wsStatus("shop", "Ready", digest(1)), t0)
	d := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	st.SetDirectives([]ccapi.Directive{d}, t0)
	if got := st.ToWrite(t0).Write; len(got) != 1 {
		t.Fatalf("first poll: %d to write, want 1", len(got))
	}
	st.Written(d, true, t0)
	st.SetDirectives([]ccapi.Directive{d}, t0.Add(time.Minute))
	if got := st.ToWrite(t0).Write; len(got) != 0 {
		t.Errorf("second poll wrote again: %v", got)
	}
	st.SetDirectives(nil, t0.Add(2*time.Minute))
	if got := st.ToWrite(t0).Write; len(got) != 0 {
		t.Errorf("a withdrawn directive wrote: %v", got)
	}
	// Asked again after a withdrawal: written again.
	st.SetDirectives([]ccapi.Directive{d}, t0.Add(3*time.Minute))
	if got := st.ToWrite(t0).Write; len(got) != 1 {
		t.Errorf("a directive asked again after its withdrawal: %d to write, want 1", len(got))
	}
}
