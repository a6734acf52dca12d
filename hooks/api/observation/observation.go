// Package observation holds the wire types of the localhost protocol
// between the hook server and the reporter sidecar: what the hooks observed
// and decided, handed over without waiting.
//
// Who imports it: the hooks (internal/hooks/workspace,
// internal/hooks/resourceclaim, internal/hooks/nodehealth), which build
// observations with the constructors here and hand them to a Sink; the
// reporter, which turns them into Cluster Control's wire types
// (hooks/api/clustercontrol), Kubernetes Events and Workspace annotations;
// and anyone who writes another sidecar for the hook server. It is public
// for that last reader.
//
// It belongs to the hooks' side of the seam, so it imports no part of
// Cluster Control's API, nor net/http nor any package of this module that
// does; the transport is internal/handoff (client, beside the hook server)
// and internal/reporter (server). k8s.io/apimachinery still links net/http
// in transitively, which is why the check is on this module's imports, not
// on `go list -deps`.
package observation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// PathObservations is the reporter's localhost endpoint taking a POSTed
// Batch.
const PathObservations = "/v1/observations"

// Sink takes observations without blocking. The hook server's
// *handoff.Client is one, and a nil *handoff.Client discards.
type Sink interface {
	Send(obs Observation)
}

// Discard is the Sink that drops everything: the sink when no reporter is
// configured (tests, render).
var Discard Sink = discard{}

type discard struct{}

func (discard) Send(Observation) {}

// OrDiscard returns s, or Discard when s is nil, so that a hook can call
// Send without checking.
func OrDiscard(s Sink) Sink {
	if s == nil {
		return Discard
	}
	return s
}

// Batch is the body of POST /v1/observations.
type Batch struct {
	Observations []Observation `json:"observations"`
}

// Observation is one thing the hook server saw. Exactly one field is set.
type Observation struct {
	Workspace        *WorkspaceStatus `json:"workspace,omitempty"`
	WorkspaceDeleted *WorkspaceRef    `json:"workspaceDeleted,omitempty"`
	Node             *corev1.Node     `json:"node,omitempty"`
	Pod              *PodPlacement    `json:"pod,omitempty"`
	Claim            *ClaimDecision   `json:"claim,omitempty"`
}

// WorkspaceRef names a workspace. UID, when known, lets an Event about a
// workspace that is already gone still name the right object.
type WorkspaceRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
	// ObservedAt is when the hook saw the deletion (see
	// WorkspaceStatus.ObservedAt); zero when it is not known.
	ObservedAt time.Time `json:"observedAt,omitzero"`
}

// WorkspaceStatus is a workspace's status as the workspace hook computed it,
// with the few facts of its spec and metadata the reporter acts on.
type WorkspaceStatus struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`

	ClusterClass       string                              `json:"clusterClass,omitempty"`
	ObservedGeneration int64                               `json:"observedGeneration,omitempty"`
	Phase              string                              `json:"phase"`
	Conditions         []metav1.Condition                  `json:"conditions,omitempty"`
	Replicas           int32                               `json:"replicas"`
	ReadyReplicas      int32                               `json:"readyReplicas"`
	UpdatedReplicas    int32                               `json:"updatedReplicas"`
	ArtifactHash       string                              `json:"artifactHash,omitempty"`
	Datastores         []v1alpha1.WorkspaceDatastoreStatus `json:"datastores,omitempty"`

	// WantedArtifactHash is the workspace's formspec.dev/artifact-binary-hash
	// annotation: the binary its pods are asked to run. It differs from
	// ArtifactHash while they roll onto it.
	WantedArtifactHash string `json:"wantedArtifactHash,omitempty"`
	// Idle is true when the workspace carries formspec.dev/idle: "true".
	Idle bool `json:"idle,omitempty"`
	// WakeOverflow is true when it carries formspec.dev/wake-overflow:
	// "true", so that the reporters can take away one that nobody needs.
	WakeOverflow bool `json:"wakeOverflow,omitempty"`
	// Terminating is true once the workspace has a deletion timestamp.
	Terminating bool `json:"terminating,omitempty"`
	// Class is the ClusterClass the hook saw, when it saw one.
	Class *ClassInfo `json:"class,omitempty"`

	// ObservedAt is when the hook computed this status, on the hook
	// server's clock. Every sync of a workspace may go to either replica,
	// and each replica's sidecar reports what its own hook server saw; the
	// hook's time, not the time a sidecar took the observation (a hand-off
	// lingers up to a second), is what orders the reports of two replicas
	// at Cluster Control. Zero when it is not known.
	ObservedAt time.Time `json:"observedAt,omitzero"`
	// StatusChanged is true when the status differs from the one the
	// Workspace carried when the hook was called: Metacontroller is about
	// to write it, so this observation changes what the API server holds.
	// The sidecar reports it even when its own latest state of the
	// workspace is the same, because the other replica's sidecar may have
	// reported a state in between (Ready, then Progressing from the other
	// replica, then Ready again here).
	StatusChanged bool `json:"statusChanged,omitempty"`
}

// Milestones are what tell one state of a workspace from another for the
// reporter's announcements (its Events: a rollout, a missing class,
// scaled to zero, woken, teardown). Two statuses of a workspace with the
// same milestones differ only in counts, messages and times, so the later
// one says all the earlier said; the hand-off to the sidecar merges only
// those (internal/handoff), and keeps every transition. The reporter
// acts on exactly these facts (its wsFacts).
type Milestones struct {
	Class, Phase, ArtifactHash, WantedArtifactHash string
	// DegradedReason is the Degraded condition's reason while it is True.
	DegradedReason    string
	Idle, Terminating bool
}

// Milestones returns the status's milestones.
func (s *WorkspaceStatus) Milestones() Milestones {
	m := Milestones{Class: s.ClusterClass, Phase: s.Phase, ArtifactHash: s.ArtifactHash, WantedArtifactHash: s.WantedArtifactHash,
		Idle: s.Idle, Terminating: s.Terminating}
	for _, c := range s.Conditions {
		if c.Type == v1alpha1.ConditionDegraded && c.Status == metav1.ConditionTrue {
			m.DegradedReason = c.Reason
		}
	}
	return m
}

// ClassInfo is what Cluster Control is told about a ClusterClass.
type ClassInfo struct {
	Name string `json:"name"`
	// MaxWorkspaces is the class's placement limit (0: none), reported, not
	// enforced.
	MaxWorkspaces int32 `json:"maxWorkspaces"`
	// ScaleToZero is the class's scaling.scaleToZero: whether an idle
	// annotation takes the workspace's pods down, which the reporter's
	// idle budget counts until they are gone.
	ScaleToZero bool `json:"scaleToZero,omitempty"`
	// Wake is set when the class's workspaces wake on request: what the
	// reporter needs to wake, cap and idle them.
	Wake *WakeInfo `json:"wake,omitempty"`
}

// WakeInfo is a wake-on-request class's settings, with defaults applied.
type WakeInfo struct {
	// IdleAfterSeconds idles a workspace the interceptor has seen no
	// request for this long; 0: never.
	IdleAfterSeconds int32 `json:"idleAfterSeconds,omitempty"`
	// TimeoutSeconds is how long the interceptor holds a request.
	TimeoutSeconds int32 `json:"timeoutSeconds"`
	// MaxHeldRequests is the cap on requests held while the workspace wakes.
	MaxHeldRequests int32 `json:"maxHeldRequests"`
}

// PodPlacement is where one workspace pod runs.
type PodPlacement struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Workspace is the pod's formspec.dev/workspace label.
	Workspace string          `json:"workspace"`
	NodeName  string          `json:"nodeName,omitempty"`
	Phase     corev1.PodPhase `json:"phase,omitempty"`
	// Terminating is true once the pod has a deletion timestamp: it no longer
	// counts towards its node's workspaces.
	Terminating bool `json:"terminating,omitempty"`
}

// ClaimDecision is what the resourceclaim hook decided about one claim.
// It carries no secret material: the reason and message are the claim's
// own status condition, and CredentialsVersion is a digest of the status's
// credentials hash, so the reporter can tell a rotation without holding
// anything that could be tested against a guessed password.
type ClaimDecision struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
	// Workspace is the claim's spec.workspace.
	Workspace string `json:"workspace,omitempty"`
	Granted   bool   `json:"granted"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// CredentialsVersion changes when the granted credentials change.
	CredentialsVersion string `json:"credentialsVersion,omitempty"`
	// Since is when the decision last changed (the Ready condition's
	// lastTransitionTime).
	Since metav1.Time `json:"since,omitempty"`
	// Exposed is the claim's CredentialsExposed finding while it is True:
	// its credentials Secret carries a copy of its own data where anyone
	// who can read the Secret's metadata sees it. Nil otherwise.
	Exposed *Finding `json:"exposed,omitempty"`
	// LegacySignature is the claim's LegacySignature finding while it is
	// True: it is granted on a v1 signature, which binds no namespace.
	// Nil otherwise.
	LegacySignature *Finding `json:"legacySignature,omitempty"`
	// Repeat says the claim's status already recorded this decision: the
	// same verdict and reason, the same credentials, the same exposure.
	// Every resync of a claim repeats its decision, and a repeat changes
	// nothing the reporter announces, so the hand-off need not post it at
	// once. It stays in the hook server: it is not part of the wire.
	Repeat bool `json:"-"`
}

// Finding is a condition of the user's object that the reporter announces,
// as the hook wrote it: its reason, and a message that names objects and
// annotations, never a value.
type Finding struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// WorkspaceObservation builds the observation the workspace hook hands over
// after computing status for ws.
func WorkspaceObservation(ws *v1alpha1.Workspace, status *v1alpha1.WorkspaceStatus, at time.Time) Observation {
	return Observation{Workspace: &WorkspaceStatus{
		Namespace:          ws.Namespace,
		Name:               ws.Name,
		UID:                ws.UID,
		ClusterClass:       ws.Spec.ClusterClass,
		ObservedGeneration: status.ObservedGeneration,
		Phase:              status.Phase,
		Conditions:         status.Conditions,
		Replicas:           status.Replicas,
		ReadyReplicas:      status.ReadyReplicas,
		UpdatedReplicas:    status.UpdatedReplicas,
		ArtifactHash:       status.ArtifactHash,
		Datastores:         status.Datastores,
		WantedArtifactHash: ws.Annotations[v1alpha1.AnnotationArtifactBinaryHash],
		Idle:               ws.Annotations[v1alpha1.AnnotationIdle] == "true",
		WakeOverflow:       ws.Annotations[v1alpha1.AnnotationWakeOverflow] == "true",
		Terminating:        ws.DeletionTimestamp != nil,
		ObservedAt:         at,
		StatusChanged:      !sameStatus(&ws.Status, status),
	}}
}

// sameStatus reports whether two workspace statuses are the same, field by
// field, as Metacontroller compares the status it is about to write with
// the one the API server holds.
func sameStatus(a, b *v1alpha1.WorkspaceStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Phase == b.Phase &&
		a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.ServiceName == b.ServiceName && a.ArtifactHash == b.ArtifactHash &&
		slices.Equal(a.Datastores, b.Datastores) &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y metav1.Condition) bool {
			return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
				x.ObservedGeneration == y.ObservedGeneration && x.LastTransitionTime.Equal(&y.LastTransitionTime)
		})
}

// WithClass adds the ClusterClass the hook saw to a workspace observation;
// a nil class (not found) leaves it unchanged.
func (o Observation) WithClass(class *v1alpha1.ClusterClass) Observation {
	if o.Workspace == nil || class == nil {
		return o
	}
	ws := *o.Workspace
	ws.Class = &ClassInfo{Name: class.Name, MaxWorkspaces: class.Spec.MaxWorkspaces, ScaleToZero: class.Spec.Scaling.ScaleToZero}
	if class.WakesOnRequest() {
		sc := class.Spec.Scaling
		ws.Class.Wake = &WakeInfo{
			IdleAfterSeconds: sc.IdleAfterSeconds,
			TimeoutSeconds:   ptr.Deref(sc.WakeTimeoutSeconds, v1alpha1.DefaultWakeTimeoutSeconds),
			MaxHeldRequests:  ptr.Deref(sc.MaxHeldRequests, v1alpha1.DefaultMaxHeldRequests),
		}
	}
	o.Workspace = &ws
	return o
}

// WorkspaceDeletedObservation builds the observation the workspace hook
// hands over once a workspace's teardown is finished.
func WorkspaceDeletedObservation(ws *v1alpha1.Workspace, at time.Time) Observation {
	return Observation{WorkspaceDeleted: &WorkspaceRef{Namespace: ws.Namespace, Name: ws.Name, UID: ws.UID, ObservedAt: at}}
}

// ClaimObservation builds the observation the resourceclaim hook hands over
// after deciding claim's status. It compares that status with the one the
// claim was observed with to tell a repeated decision (Repeat).
func ClaimObservation(claim *v1alpha1.ResourceClaim, status *v1alpha1.ResourceClaimStatus) Observation {
	d, _ := claimDecision(claim, status)
	if was, decided := claimDecision(claim, &claim.Status); decided {
		d.Repeat = was.Granted == d.Granted && was.Reason == d.Reason &&
			was.CredentialsVersion == d.CredentialsVersion && (was.Exposed == nil) == (d.Exposed == nil) &&
			(was.LegacySignature == nil) == (d.LegacySignature == nil)
	}
	return Observation{Claim: d}
}

// claimDecision reads a decision from a claim's status: its Ready
// condition, its credentials hash as a version, and its CredentialsExposed
// condition while True. It reports false when status has no Ready
// condition: no decision yet.
func claimDecision(claim *v1alpha1.ResourceClaim, status *v1alpha1.ResourceClaimStatus) (*ClaimDecision, bool) {
	d := &ClaimDecision{
		Namespace: claim.Namespace,
		Name:      claim.Name,
		UID:       claim.UID,
		Workspace: claim.Spec.Workspace,
	}
	decided := false
	for _, c := range status.Conditions {
		switch {
		case c.Type == v1alpha1.ConditionReady:
			decided = true
			d.Granted = c.Status == metav1.ConditionTrue
			d.Reason, d.Message, d.Since = c.Reason, c.Message, c.LastTransitionTime
		case c.Type == v1alpha1.ConditionCredentialsExposed && c.Status == metav1.ConditionTrue:
			d.Exposed = &Finding{Reason: c.Reason, Message: c.Message}
		case c.Type == v1alpha1.ConditionLegacySignature && c.Status == metav1.ConditionTrue:
			d.LegacySignature = &Finding{Reason: c.Reason, Message: c.Message}
		}
	}
	if d.Granted && status.CredentialsHash != "" {
		sum := sha256.Sum256([]byte("formspec.dev/credentials-version|" + status.CredentialsHash))
		d.CredentialsVersion = hex.EncodeToString(sum[:8])
	}
	return d, decided
}

// Validate reports an observation the reporter cannot use.
func (o *Observation) Validate() error {
	set := 0
	for _, present := range []bool{o.Workspace != nil, o.WorkspaceDeleted != nil, o.Node != nil, o.Pod != nil, o.Claim != nil} {
		if present {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("observation has %d kinds set, want exactly 1", set)
	}
	switch {
	case o.Workspace != nil && (o.Workspace.Namespace == "" || o.Workspace.Name == ""):
		return fmt.Errorf("workspace observation has no namespace or name")
	case o.WorkspaceDeleted != nil && (o.WorkspaceDeleted.Namespace == "" || o.WorkspaceDeleted.Name == ""):
		return fmt.Errorf("workspace deletion has no namespace or name")
	case o.Node != nil && o.Node.Name == "":
		return fmt.Errorf("node observation has no name")
	case o.Pod != nil && (o.Pod.Namespace == "" || o.Pod.Name == "" || o.Pod.Workspace == ""):
		return fmt.Errorf("pod observation has no namespace, name or workspace")
	case o.Claim != nil && (o.Claim.Namespace == "" || o.Claim.Name == ""):
		return fmt.Errorf("claim observation has no namespace or name")
	}
	return nil
}
