package workspace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

var (
	created = metav1.NewTime(time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC))
	earlier = metav1.NewTime(time.Date(2026, 1, 10, 9, 30, 0, 0, time.UTC))
	clock   = time.Date(2026, 1, 10, 12, 0, 0, 500, time.UTC)
)

func TestConditionTimes(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 1, 11, 8, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		reason   string
		deletion *metav1.Time
		previous []metav1.Condition
		next     metav1.Condition
		want     metav1.Time
	}{
		"FreshTakesCreation": {
			reason: "A workspace without conditions gets its creation time: that is when the state began.",
			next:   metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse},
			want:   created,
		},
		"UnchangedKeepsTime": {
			reason:   "A condition whose status stays keeps its transition time, even if its reason changes.",
			previous: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Old", LastTransitionTime: earlier}},
			next:     metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "New"},
			want:     earlier,
		},
		"ChangeTakesClock": {
			reason:   "A status change takes the clock, truncated to the second the API keeps.",
			previous: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, LastTransitionTime: earlier}},
			next:     metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue},
			want:     metav1.NewTime(clock.Truncate(time.Second)),
		},
		"NewTypeAmongOthersTakesClock": {
			reason:   "A condition that appears on a workspace that already has others is a change now.",
			previous: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, LastTransitionTime: earlier}},
			next:     metav1.Condition{Type: "Degraded", Status: metav1.ConditionTrue},
			want:     metav1.NewTime(clock.Truncate(time.Second)),
		},
		"DeletionTakesDeletionTime": {
			reason:   "During deletion a change began when the deletion did.",
			deletion: &deleted,
			previous: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: earlier}},
			next:     metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse},
			want:     deleted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Now: func() time.Time { return clock }})
			ws := &v1alpha1.Workspace{
				ObjectMeta: metav1.ObjectMeta{Generation: 4, CreationTimestamp: created, DeletionTimestamp: tc.deletion},
				Status:     v1alpha1.WorkspaceStatus{Conditions: tc.previous},
			}
			got := h.conditions(ws, tc.next)
			if diff := cmp.Diff(tc.want, got[0].LastTransitionTime); diff != "" {
				t.Errorf("%s\nlastTransitionTime: -want, +got:\n%s", tc.reason, diff)
			}
			if got[0].ObservedGeneration != 4 {
				t.Errorf("%s\nobservedGeneration: got %d, want 4", tc.reason, got[0].ObservedGeneration)
			}
		})
	}
}

func deployment(gen int64, replicas int32, st appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}, Status: st}
}

func TestStatusPhase(t *testing.T) {
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	quota := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Message: "exceeded quota"}
	cases := map[string]struct {
		reason       string
		dep          *appsv1.Deployment
		classMissing bool
		bindings     []binding
		wantPhase    string
		wantDegraded string
		// wantProgressing, when set, is the Progressing condition's reason.
		wantProgressing string
	}{
		"NothingObserved": {
			reason: "Before the Deployment exists the workspace is pending.", wantPhase: v1alpha1.PhasePending, wantDegraded: "AsExpected",
		},
		"Ready": {
			reason:    "All replicas updated and available.",
			dep:       deployment(2, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, ReadyReplicas: 2}),
			wantPhase: v1alpha1.PhaseReady, wantDegraded: "AsExpected",
		},
		"StaleObservedGeneration": {
			reason:    "The Deployment controller has not seen the latest spec yet: still progressing.",
			dep:       deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}),
			wantPhase: v1alpha1.PhaseProgressing, wantDegraded: "AsExpected",
		},
		"OldReplicasLeft": {
			reason:    "Old pods still running means the rollout is not over.",
			dep:       deployment(2, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}),
			wantPhase: v1alpha1.PhaseProgressing, wantDegraded: "AsExpected",
		},
		"Idle": {
			reason:    "Scaled to zero with no pod left.",
			dep:       deployment(2, 0, appsv1.DeploymentStatus{ObservedGeneration: 2}),
			wantPhase: v1alpha1.PhaseIdle, wantDegraded: "AsExpected",
		},
		"ScalingDown": {
			reason:    "Scaled to zero but pods still terminating is progress, not idle.",
			dep:       deployment(2, 0, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, AvailableReplicas: 1}),
			wantPhase: v1alpha1.PhaseProgressing, wantDegraded: "AsExpected",
		},
		"Deadline": {
			reason:    "A rollout past its deadline degrades the workspace.",
			dep:       deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{deadline}}),
			wantPhase: v1alpha1.PhaseDegraded, wantDegraded: "ProgressDeadlineExceeded",
		},
		"ReplicaFailure": {
			reason:    "Pods that cannot be created (quota) degrade the workspace.",
			dep:       deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{quota}}),
			wantPhase: v1alpha1.PhaseDegraded, wantDegraded: "ReplicaFailure",
		},
		"ClassMissingWins": {
			reason:       "A missing class is reported before anything else.",
			dep:          deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{deadline}}),
			classMissing: true,
			wantPhase:    v1alpha1.PhaseDegraded, wantDegraded: "ClusterClassNotFound",
		},
		"DatastorePending": {
			reason:    "A claim still being verified makes an otherwise ready workspace Progressing, not Degraded.",
			dep:       deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}),
			bindings:  []binding{pendingBinding},
			wantPhase: v1alpha1.PhaseProgressing, wantDegraded: "AsExpected", wantProgressing: "WaitingForCredentials",
		},
		"DatastoreDenied": {
			reason:    "A denied claim degrades an otherwise ready workspace.",
			dep:       deployment(2, 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}),
			bindings:  []binding{{ref: v1alpha1.DatastoreRef{Name: "db"}, status: v1alpha1.WorkspaceDatastoreStatus{Name: "db", Claim: "c", State: v1alpha1.DatastoreDenied}}},
			wantPhase: v1alpha1.PhaseDegraded, wantDegraded: "DatastoreNotInjected", wantProgressing: "RolloutComplete",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Now: func() time.Time { return clock }})
			o := &observed{ws: &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 1}}, deployment: tc.dep}
			var cp *problem
			if tc.classMissing {
				cp = classMissing(o)
			}
			st := h.status(o, tc.bindings, cp, nil, nil)
			if st.Phase != tc.wantPhase {
				t.Errorf("%s\nphase: got %q, want %q", tc.reason, st.Phase, tc.wantPhase)
			}
			if got := findCondition(st.Conditions, v1alpha1.ConditionDegraded).Reason; got != tc.wantDegraded {
				t.Errorf("%s\nDegraded reason: got %q, want %q", tc.reason, got, tc.wantDegraded)
			}
			if got := findCondition(st.Conditions, v1alpha1.ConditionProgressing).Reason; tc.wantProgressing != "" && got != tc.wantProgressing {
				t.Errorf("%s\nProgressing reason: got %q, want %q", tc.reason, got, tc.wantProgressing)
			}
		})
	}
}

var pendingBinding = binding{ref: v1alpha1.DatastoreRef{Name: "db"}, status: v1alpha1.WorkspaceDatastoreStatus{Name: "db", Claim: "c", State: v1alpha1.DatastorePending}}

// TestPhasePrecedence pins which phase wins when several apply:
// Terminating > Degraded > Pending > Idle > Progressing > Ready, the order
// docs/workspaces.md gives.
func TestPhasePrecedence(t *testing.T) {
	deletion := metav1.NewTime(created.Add(time.Hour))
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	ready := deployment(2, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2})
	idle := deployment(2, 0, appsv1.DeploymentStatus{ObservedGeneration: 2})
	stuck := deployment(2, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{deadline}})
	missing := binding{ref: v1alpha1.DatastoreRef{Name: "db"}, status: v1alpha1.WorkspaceDatastoreStatus{Name: "db", State: v1alpha1.DatastoreMissing}}
	cases := map[string]struct {
		reason   string
		deleted  bool
		dep      *appsv1.Deployment
		bindings []binding
		want     string
	}{
		"TerminatingOverDegraded": {reason: "During teardown nothing else matters.", deleted: true, dep: stuck, bindings: []binding{missing}, want: v1alpha1.PhaseTerminating},
		"DegradedOverIdle":        {reason: "A missing claim is a problem even while idle.", dep: idle, bindings: []binding{missing}, want: v1alpha1.PhaseDegraded},
		"DegradedOverProgressing": {reason: "A stuck rollout is a problem, not progress.", dep: stuck, bindings: []binding{pendingBinding}, want: v1alpha1.PhaseDegraded},
		"PendingOverWaiting":      {reason: "Before the Deployment exists the workspace is Pending, claims or not.", bindings: []binding{pendingBinding}, want: v1alpha1.PhasePending},
		"IdleOverWaiting":         {reason: "An idle workspace that waits for a claim is Idle: nothing runs that could use it.", dep: idle, bindings: []binding{pendingBinding}, want: v1alpha1.PhaseIdle},
		"ProgressingOverReady":    {reason: "Ready pods still waiting for a claim will roll again: Progressing.", dep: ready, bindings: []binding{pendingBinding}, want: v1alpha1.PhaseProgressing},
		"Ready":                   {reason: "Nothing else applies.", dep: ready, want: v1alpha1.PhaseReady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Now: func() time.Time { return clock }})
			ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 2, CreationTimestamp: created}}
			if tc.deleted {
				ws.DeletionTimestamp = &deletion
			}
			got := h.status(&observed{ws: ws, deployment: tc.dep}, tc.bindings, nil, nil, nil).Phase
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nphase: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestStatusArtifactHash pins the rule a restart directive's consumption
// rests on: status.artifactHash is the hash the pods run, which is the
// template's only once its rollout has completed, and until then the
// hash the status already carried.
func TestStatusArtifactHash(t *testing.T) {
	withHash := func(d *appsv1.Deployment, hash string) *appsv1.Deployment {
		d.Spec.Template.Annotations = map[string]string{v1alpha1.AnnotationArtifactBinaryHash: hash}
		return d
	}
	rolled := appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	cases := map[string]struct {
		reason string
		// previous is the status.artifactHash the Workspace carries.
		previous string
		dep      *appsv1.Deployment
		want     string
	}{
		"RolledOut": {
			reason:   "Every replica updated and ready, no old pod left: the pods run the template's hash.",
			previous: "sha256:old",
			dep:      withHash(deployment(3, 2, rolled), "sha256:new"),
			want:     "sha256:new",
		},
		"TemplateNotObservedYet": {
			reason:   "Metacontroller has just applied the template (generation 4, observed 3): no pod runs it yet.",
			previous: "sha256:old",
			dep:      withHash(deployment(4, 2, rolled), "sha256:new"),
			want:     "sha256:old",
		},
		"SomeUpdated": {
			reason:   "One of two replicas updated: the other still runs the old binary.",
			previous: "sha256:old",
			dep:      withHash(deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}), "sha256:new"),
			want:     "sha256:old",
		},
		"UpdatedNotReady": {
			reason:   "Every replica updated, but one is not ready yet (a slow start): not yet.",
			previous: "sha256:old",
			dep:      withHash(deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}), "sha256:new"),
			want:     "sha256:old",
		},
		"OldPodLeft": {
			reason:   "Updated and ready, but an old pod still counts in status.replicas.",
			previous: "sha256:old",
			dep:      withHash(deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3}), "sha256:new"),
			want:     "sha256:old",
		},
		"OldPodTerminating": {
			reason:   "An old pod still shutting down runs the old binary.",
			previous: "sha256:old",
			dep: withHash(deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
				TerminatingReplicas: ptr.To[int32](1)}), "sha256:new"),
			want: "sha256:old",
		},
		"FirstRollout": {
			reason: "On a first rollout the status carries no hash, and none is reported until the first pods are all up.",
			dep:    withHash(deployment(1, 2, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 0}), "sha256:new"),
			want:   "",
		},
		"ScaledToZero": {
			reason:   "No pod runs, so none runs an old binary: whatever starts runs the template.",
			previous: "sha256:old",
			dep:      withHash(deployment(3, 0, appsv1.DeploymentStatus{ObservedGeneration: 3}), "sha256:new"),
			want:     "sha256:new",
		},
		"NoDeployment": {
			reason:   "No Deployment observed, no pods, no hash.",
			previous: "sha256:old",
			want:     "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := New(Config{Now: func() time.Time { return clock }})
			ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 2, CreationTimestamp: created},
				Status: v1alpha1.WorkspaceStatus{ArtifactHash: tc.previous}}
			got := h.status(&observed{ws: ws, deployment: tc.dep}, nil, nil, nil, nil).ArtifactHash
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus.artifactHash: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
