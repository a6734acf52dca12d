package reporter

import (
	"encoding/json"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
)

// TestDirectives holds the one rule for directives: when one is written
// onto its Workspace and when it is reported consumed.
func TestDirectives(t *testing.T) {
	restart := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionRestartRequired, ArtifactHash: "h2"}
	idle := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	wake := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionWake}
	cases := map[string]struct {
		reason       string
		ws           *observation.WorkspaceStatus
		directive    ccapi.Directive
		wantWrite    bool
		wantConsumed *ccapi.DirectiveConsumed
	}{
		"RestartUnknownWorkspace": {
			reason:    "a workspace this reporter has not seen gets the write: the patch is idempotent",
			directive: restart,
			wantWrite: true,
		},
		"RestartNotAnnotated": {
			reason:    "the annotation is missing: write it",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: "h1"},
			directive: restart,
			wantWrite: true,
		},
		"RestartRolling": {
			reason:    "annotated but the pods still run the old hash: nothing to write, not consumed yet",
			ws:        &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Progressing", ArtifactHash: "h1", WantedArtifactHash: "h2"},
			directive: restart,
		},
		"RestartDone": {
			reason:       "the pods run the hash: consumed (this also covers a lost consumption report)",
			ws:           &observation.WorkspaceStatus{Namespace: "ns", Name: "shop", Phase: "Ready", ArtifactHash: "h2", WantedArtifactHash: "h2"},
			directive:    restart,
			wantConsumed: &ccapi.DirectiveConsumed{Action: ccapi.ActionRestartRequired, ArtifactHash: "h2"},
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
			st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
			if tc.ws != nil {
				st.observeWorkspace(tc.ws, t0)
				p, _ := st.next()
				st.finish(p, sent, t0)
			}
			st.setDirectives([]ccapi.Directive{tc.directive}, t0.Add(time.Second))
			var wantWrites []ccapi.Directive
			if tc.wantWrite {
				wantWrites = []ccapi.Directive{tc.directive}
			}
			if diff := cmp.Diff(wantWrites, st.toWrite()); diff != "" {
				t.Errorf("%s\nto write (-want, +got):\n%s", tc.reason, diff)
			}
			var got *ccapi.DirectiveConsumed
			if p, ok := st.next(); ok {
				var rep ccapi.WorkspaceStatusReport
				if err := json.Unmarshal(p.body, &rep); err != nil {
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

// TestDirectiveWrittenOnce checks that a directive is written once, not on
// every poll, and that withdrawing it writes nothing.
func TestDirectiveWrittenOnce(t *testing.T) {
	st := newState(limits{workspaces: 10, tombstones: 10}, func(string) {})
	d := ccapi.Directive{Namespace: "ns", Name: "shop", Action: ccapi.ActionIdle}
	st.setDirectives([]ccapi.Directive{d}, t0)
	if got := st.toWrite(); len(got) != 1 {
		t.Fatalf("first poll: %d to write, want 1", len(got))
	}
	st.written(d)
	st.setDirectives([]ccapi.Directive{d}, t0.Add(time.Minute))
	if got := st.toWrite(); len(got) != 0 {
		t.Errorf("second poll wrote again: %v", got)
	}
	st.setDirectives(nil, t0.Add(2*time.Minute))
	if got := st.toWrite(); len(got) != 0 {
		t.Errorf("a withdrawn directive wrote: %v", got)
	}
	// Asked again after a withdrawal: written again.
	st.setDirectives([]ccapi.Directive{d}, t0.Add(3*time.Minute))
	if got := st.toWrite(); len(got) != 1 {
		t.Errorf("a directive asked again after its withdrawal: %d to write, want 1", len(got))
	}
}
