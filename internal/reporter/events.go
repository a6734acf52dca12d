package reporter

import (
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// Event types.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)

// reportingController names the reporter in the Events it records.
const reportingController = "formspec.dev/reporter"

// event is a decision a user should see on their object, as an
// events.k8s.io/v1 Event.
type event struct {
	ref    corev1.ObjectReference
	typ    string
	reason string
	action string
	note   string
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
func workspaceEvents(ref corev1.ObjectReference, prev *wsFacts, cur wsFacts, o *observation.WorkspaceStatus) []event {
	var out []event
	if cur.Terminating && (prev == nil || !prev.Terminating) {
		out = append(out, event{ref: ref, typ: eventNormal, reason: "TeardownStarted", action: "Delete",
			note: "scaling to zero, then removing the workspace's children"})
	}
	if r := cur.DegradedReason; r != "" && (prev == nil || prev.DegradedReason != r) {
		out = append(out, event{ref: ref, typ: eventWarning, reason: r, action: "Sync", note: degradedNote(cur, o)})
	}
	if cur.WantedArtifactHash != "" && cur.WantedArtifactHash != cur.ArtifactHash && !cur.Terminating && (prev == nil || prev.WantedArtifactHash != cur.WantedArtifactHash) {
		out = append(out, event{ref: ref, typ: eventNormal, reason: "RollingOut", action: "Rollout",
			note: fmt.Sprintf("rolling the workspace's pods onto binary %s", cur.WantedArtifactHash)})
	}
	if prev != nil && !cur.Terminating {
		switch {
		case cur.Phase == v1alpha1.PhaseIdle && prev.Phase != v1alpha1.PhaseIdle:
			out = append(out, event{ref: ref, typ: eventNormal, reason: "ScaledToZero", action: "Scale",
				note: "the workspace is idle and scaled to zero replicas"})
		case prev.Phase == v1alpha1.PhaseIdle && cur.Phase != v1alpha1.PhaseIdle:
			out = append(out, event{ref: ref, typ: eventNormal, reason: "Woken", action: "Scale",
				note: "the workspace is no longer idle and scales back up"})
		}
	}
	return out
}

// degradedNote is the note of the Event announcing a Degraded reason: the
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
func claimEvents(c *observation.ClaimDecision, prev *claimEntry, now time.Time) []event {
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	fresh := prev == nil && !c.Since.IsZero() && now.Sub(c.Since.Time) < freshDecision
	var out []event
	switch {
	case !c.Granted && (fresh || prev != nil && (prev.granted || prev.reason != c.Reason)):
		out = append(out, event{ref: ref, typ: eventWarning, reason: "ClaimDenied", action: "Verify",
			note: denialNote(c)})
	case c.Granted && (fresh || prev != nil && !prev.granted):
		out = append(out, event{ref: ref, typ: eventNormal, reason: "ClaimGranted", action: "Verify",
			note: fmt.Sprintf("grant verified; credentials projected for workspace %q", c.Workspace)})
	case c.Granted && prev != nil && prev.version != "" && c.CredentialsVersion != "" && prev.version != c.CredentialsVersion:
		out = append(out, event{ref: ref, typ: eventNormal, reason: "CredentialsRotated", action: "Verify",
			note: "the datastore's credentials changed; the workspace's pods roll onto them"})
	}
	if c.Exposed != nil && (prev == nil || !prev.exposed) {
		out = append(out, event{ref: ref, typ: eventWarning, reason: v1alpha1.ConditionCredentialsExposed, action: "Verify",
			note: exposureNote(c.Exposed)})
	}
	// A grant on a v1 signature is announced when it begins, so that a
	// platform moving from the original operator sees each one it still
	// has (the decision counter counts them on every sync).
	if c.LegacySignature != nil && (prev == nil || !prev.legacy) {
		out = append(out, event{ref: ref, typ: eventWarning, reason: v1alpha1.ConditionLegacySignature, action: "Verify",
			note: findingNote(c.LegacySignature)})
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

// maxNote is the API server's limit on an Event's note.
const maxNote = 1024

// truncateNote cuts a note to the API's limit on a rune boundary.
func truncateNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	s = s[:maxNote-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// eventLimits bound how many Events the reporter writes: per object, a
// burst then a trickle, so a flapping workspace cannot flood its namespace;
// overall, so a restart that sees thousands of fresh decisions at once
// does not flood the API server.
type eventLimits struct {
	PerObjectBurst int
	PerObjectEvery time.Duration
	Burst          int
	PerSecond      float64
}

// maxLimitedObjects bounds the per-object limiters kept; beyond it they are
// all forgotten, which at worst lets a few objects burst again.
const maxLimitedObjects = 10000

// eventWriter rate-limits Events and hands them to client-go's events
// recorder, which deduplicates repeats of one reason on one object into a
// series (one Event with a count) and writes them in the background.
type eventWriter struct {
	rec    events.EventRecorder
	lim    eventLimits
	now    func() time.Time
	count  func(result string)
	mu     sync.Mutex
	all    *rate.Limiter
	perObj map[objectKey]*rate.Limiter
}

// objectKey names the object an Event is about.
type objectKey struct {
	kind string
	name types.NamespacedName
}

func newEventWriter(rec events.EventRecorder, lim eventLimits, now func() time.Time, count func(string)) *eventWriter {
	return &eventWriter{
		rec:    rec,
		lim:    lim,
		now:    now,
		count:  count,
		all:    rate.NewLimiter(rate.Limit(lim.PerSecond), lim.Burst),
		perObj: map[objectKey]*rate.Limiter{},
	}
}

// allow takes a token for an Event about ref, from the object's bucket and
// the overall one.
func (w *eventWriter) allow(ref corev1.ObjectReference) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	k := objectKey{kind: ref.Kind, name: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}
	l, ok := w.perObj[k]
	if !ok {
		if len(w.perObj) >= maxLimitedObjects {
			clear(w.perObj)
		}
		l = rate.NewLimiter(rate.Every(w.lim.PerObjectEvery), w.lim.PerObjectBurst)
		w.perObj[k] = l
	}
	if !l.AllowN(now, 1) {
		return false
	}
	return w.all.AllowN(now, 1)
}

// write records evs, dropping (and counting) those over the limits.
func (w *eventWriter) write(evs []event) {
	for _, ev := range evs {
		if !w.allow(ev.ref) {
			w.count("rate_limited")
			continue
		}
		w.count("recorded")
		ref := ev.ref
		w.rec.Eventf(&ref, nil, ev.typ, ev.reason, ev.action, "%s", truncateNote(ev.note))
	}
}
