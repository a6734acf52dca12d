package state

import (
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Event types.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)

// Event is a decision a user should see on their object, as an
// events.k8s.io/v1 Event.
type Event struct {
	Ref    corev1.ObjectReference
	Type   string
	Reason string
	Action string
	Note   string
}

// freshDecision is how recent a claim decision must be for a reporter that
// sees it for the first time to announce it. A decision made before the
// reporter (re)started was announced then, and a restarted sidecar must not
// announce every claim in the cluster again.
const freshDecision = 5 * time.Minute

func workspaceRef(e *wsEntry) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "Workspace", Namespace: e.name.Namespace, Name: e.name.Name, UID: e.uid}
}

// workspaceEvents lists the Events a workspace observation calls for, given
// what the reporter knew of it before (nil when it is new to this
// reporter). States are announced when they begin; transitions (scaled to
// zero, woken) only when this reporter saw both sides.
func workspaceEvents(ref corev1.ObjectReference, prev *wsFacts, cur wsFacts, o *observation.WorkspaceStatus) []Event {
	var out []Event
	if cur.Terminating && (prev == nil || !prev.Terminating) {
		out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "TeardownStarted", Action: "Delete",
			Note: "scaling to zero, then removing the workspace's children"})
	}
	if r := cur.DegradedReason; r != "" && (prev == nil || prev.DegradedReason != r) {
		out = append(out, Event{Ref: ref, Type: eventWarning, Reason: r, Action: "Sync", Note: degradedNote(cur, o)})
	}
	if cur.WantedArtifactHash != "" && cur.WantedArtifactHash != cur.ArtifactHash && !cur.Terminating && (prev == nil || prev.WantedArtifactHash != cur.WantedArtifactHash) {
		out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "RollingOut", Action: "Rollout",
			Note: fmt.Sprintf("rolling the workspace's pods onto binary %s", cur.WantedArtifactHash)})
	}
	if prev != nil && !cur.Terminating {
		switch {
		case cur.Phase == v1alpha1.PhaseIdle && prev.Phase != v1alpha1.PhaseIdle:
			out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "ScaledToZero", Action: "Scale",
				Note: "the workspace is idle and scaled to zero replicas"})
		case prev.Phase == v1alpha1.PhaseIdle && cur.Phase != v1alpha1.PhaseIdle:
			out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "Woken", Action: "Scale",
				Note: "the workspace is no longer idle and scales back up"})
		}
	}
	return out
}

// degradedNote is the note of the Event announcing a Degraded Reason: the
// Degraded condition's message, which the hook writes for people and keeps
// free of secrets.
func degradedNote(f wsFacts, o *observation.WorkspaceStatus) string {
	if c := meta.FindStatusCondition(o.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Message != "" {
		return c.Message
	}
	if f.classMissing() {
		return fmt.Sprintf("ClusterClass %q not found; existing children are kept unchanged until it exists", f.Class)
	}
	return "the workspace is degraded: " + f.DegradedReason
}

// claimEvents lists the Events a claim decision calls for, given what the
// reporter knew of the claim before (nil when it is new to this reporter).
// A decision is announced once; an exposure of the claim's credentials
// (CredentialsExposed) is a state of its Secret, announced when it begins,
// as a workspace's Degraded reasons are.
func claimEvents(c *observation.ClaimDecision, prev *claimEntry, now time.Time) []Event {
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	fresh := prev == nil && !c.Since.IsZero() && now.Sub(c.Since.Time) < freshDecision
	var out []Event
	switch {
	case !c.Granted && (fresh || prev != nil && (prev.granted || prev.reason != c.Reason)):
		out = append(out, Event{Ref: ref, Type: eventWarning, Reason: "ClaimDenied", Action: "Verify",
			Note: denialNote(c)})
	case c.Granted && (fresh || prev != nil && !prev.granted):
		out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "ClaimGranted", Action: "Verify",
			Note: fmt.Sprintf("grant verified; credentials projected for workspace %q", c.Workspace)})
	case c.Granted && prev != nil && prev.version != "" && c.CredentialsVersion != "" && prev.version != c.CredentialsVersion:
		out = append(out, Event{Ref: ref, Type: eventNormal, Reason: "CredentialsRotated", Action: "Verify",
			Note: "the datastore's credentials changed; the workspace's pods roll onto them"})
	}
	if c.Exposed != nil && (prev == nil || !prev.exposed) {
		out = append(out, Event{Ref: ref, Type: eventWarning, Reason: v1alpha1.ConditionCredentialsExposed, Action: "Verify",
			Note: exposureNote(c.Exposed)})
	}
	// A grant on a v1 signature is announced when it begins, so that a
	// platform moving from the original operator sees each one it still
	// has (the decision counter counts them on every sync).
	if c.LegacySignature != nil && (prev == nil || !prev.legacy) {
		out = append(out, Event{Ref: ref, Type: eventWarning, Reason: v1alpha1.ConditionLegacySignature, Action: "Verify",
			Note: findingNote(c.LegacySignature)})
	}
	return out
}

// exposureNote is the CredentialsExposed condition's message, which names
// the Secret and the annotation and never a value.
func exposureNote(f *observation.Finding) string {
	if f.Message == "" {
		return "the credentials Secret carries a copy of its data in an annotation (" + f.Reason + ")"
	}
	return f.Message
}

// findingNote is a finding's message as the hook wrote it, or its reason.
func findingNote(f *observation.Finding) string {
	if f.Message == "" {
		return f.Reason
	}
	return f.Message
}

// denialNote is the denial's reason and the claim condition's message,
// which the hook already wrote for people and keeps free of secrets.
func denialNote(c *observation.ClaimDecision) string {
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}
