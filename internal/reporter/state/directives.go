package state

import (
	"cmp"
	"maps"
	"slices"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// annotated reports whether a workspace's annotations already say what d
// asks for, so that writing them again would change nothing.
func annotated(d ccapi.Directive, f wsFacts) bool {
	switch d.Action {
	case ccapi.ActionRestartRequired:
		return f.WantedArtifactHash == d.ArtifactHash
	case ccapi.ActionIdle:
		return f.Idle
	case ccapi.ActionWake:
		return !f.Idle
	}
	return false
}

// carriedOut is the one rule for when a directive is consumed: a restart
// once the workspace's pods run the hash (not merely once the annotation is
// Written), idle and wake once the annotation is as asked, since whether
// the workspace can scale to zero is its class's business.
func carriedOut(d ccapi.Directive, f wsFacts) bool {
	if d.Action == ccapi.ActionRestartRequired {
		return f.ArtifactHash == d.ArtifactHash
	}
	return annotated(d, f)
}

// consume reports the workspace's directive consumed if the workspace has
// carried it out, and reports whether a report became pending. Called with
// the lock held.
func (s *State) consume(k types.NamespacedName, e *wsEntry, now time.Time) bool {
	d, ok := s.directives[k]
	if !ok || e.deleted || e.statusJS == nil || !carriedOut(d, e.facts) {
		return false
	}
	delete(s.directives, k)
	c := &ccapi.DirectiveConsumed{Action: d.Action, ArtifactHash: d.ArtifactHash}
	if e.consumed != nil && *e.consumed == *c {
		return false
	}
	e.consumed = c
	s.bump(k, e, now)
	return true
}

// Reasons a directive is refused, the values of the reason label of
// formspec_reporter_directives_refused_total. A refused directive is
// neither written nor forgotten: Cluster Control still holds it, and one
// that names a workspace this reporter has not seen yet is written once
// it has.
const (
	// RefuseInvalid: the directive names no valid workspace or an action
	// this reporter does not know (the contract says to ignore those).
	RefuseInvalid = "invalid"
	// RefuseInvalidHash: a restart whose artifact hash is not "sha256:"
	// and 64 lowercase hex digits (v1alpha1.ArtifactHashPattern).
	RefuseInvalidHash = "invalid_hash"
	// RefuseForeignNamespace: a namespace in which the hook server has
	// synced no Workspace.
	RefuseForeignNamespace = "foreign_namespace"
	// RefuseUnknownWorkspace: a Workspace the hook server has not synced
	// (or whose deletion it saw), in a namespace it serves.
	RefuseUnknownWorkspace = "unknown_workspace"
)

// Refusal is a directive the reporter will not write, and why.
type Refusal struct {
	Directive ccapi.Directive
	// Reason is one of the Refuse constants.
	Reason string
	// told is set once the Refusal has been counted and logged: each
	// directive is refused once, not on every poll.
	told bool
}

// check returns why a directive Cluster Control sent cannot be carried out
// whatever the cluster holds, or "".
func check(d ccapi.Directive) string {
	if d.Validate() != nil {
		return RefuseInvalid
	}
	if d.Action == ccapi.ActionRestartRequired && !v1alpha1.ValidArtifactHash(d.ArtifactHash) {
		return RefuseInvalidHash
	}
	return ""
}

// SetDirectives replaces the directives with what Cluster Control holds
// now. A directive the workspace already carried out is consumed on the
// spot, which also covers a consumption report that was lost; a directive
// that is gone is withdrawn, and what it already wrote stays. A directive
// that fails check is refused and kept out. It reports whether any report
// became pending.
func (s *State) SetDirectives(ds []ccapi.Directive, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directives = make(map[types.NamespacedName]ccapi.Directive, len(ds))
	refused := make(map[types.NamespacedName]Refusal)
	queued := false
	for _, d := range ds {
		if len(s.directives)+len(refused) >= s.lim.Workspaces {
			s.drop(DropDirectiveLimit)
			break
		}
		k := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if reason := check(d); reason != "" {
			refused[k] = s.refusal(k, d, reason)
			delete(s.directives, k)
			continue
		}
		delete(refused, k)
		s.directives[k] = d
		if e, ok := s.workspaces[k]; ok && s.consume(k, e, now) {
			queued = true
		}
	}
	// The refusals of directives still held, to keep their told marks;
	// toWrite decides again whether each still applies.
	for k, d := range s.directives {
		if r, ok := s.refused[k]; ok && r.Directive == d {
			refused[k] = r
		}
	}
	s.refused = refused
	for k := range s.applied {
		if s.applied[k] != s.directives[k] {
			delete(s.applied, k)
		}
	}
	return queued
}

// refusal returns the refusal of d for reason, told already if this very
// refusal was. Called with the lock held.
func (s *State) refusal(k types.NamespacedName, d ccapi.Directive, reason string) Refusal {
	r := s.refused[k]
	return Refusal{Directive: d, Reason: reason, told: r.told && r.Directive == d && r.Reason == reason}
}

// DirectivePlan is what one poll does with the directives: those to write
// now, the refusals not reported yet, and the directives that began to
// wait for their budget.
type DirectivePlan struct {
	Write    []ccapi.Directive
	Refused  []Refusal
	Deferred []Deferral
}

// ToWrite plans the writes of this poll: the directives not written by
// this reporter yet and not already there as far as it has seen, for
// Workspaces it knows, in namespaces it serves, within their budget
// (budget.go). A Workspace is known once the hook server has synced it or
// the reporter's watch has seen it (watch.go). The install serves every
// namespace (Metacontroller's controllers are cluster-wide), so the
// namespaces this reporter serves are those it knows Workspaces in: a
// Directive for any other is refused as foreign, one for a Workspace it
// does not know as unknown, and written once it knows it. Directives are
// admitted oldest waiting first, then by workspace; each Refusal and each
// wait is reported once.
func (s *State) ToWrite(now time.Time) DirectivePlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	served := map[string]bool{}
	for k, e := range s.workspaces {
		if e.live() {
			served[k.Namespace] = true
		}
	}
	for k := range s.watched {
		served[k.Namespace] = true
	}
	u := s.use(now)
	var plan DirectivePlan
	waiting := make(map[types.NamespacedName]waiter, len(s.waiting))
	for _, k := range s.inLine(now) {
		d := s.directives[k]
		if s.applied[k] == d {
			continue
		}
		f, p, known := s.view(k)
		if !known {
			// Known to the hook server before the watch has listed it.
			if e, ok := s.workspaces[k]; ok && e.live() {
				f, p, known = e.facts, &e.pace, true
			}
		}
		switch {
		case !served[k.Namespace]:
			s.refused[k] = s.refusal(k, d, RefuseForeignNamespace)
			continue
		case !known:
			s.refused[k] = s.refusal(k, d, RefuseUnknownWorkspace)
			continue
		}
		delete(s.refused, k)
		if annotated(d, f) {
			s.applied[k] = d
			continue
		}
		if reason := s.admit(f, p, d, &u, now); reason != "" {
			w, ok := s.waiting[k]
			if !ok {
				w.since = now
			}
			w.told = w.told && w.Directive == d
			w.Directive, w.Reason = d, reason
			if !w.told {
				w.told = true
				plan.Deferred = append(plan.Deferred, Deferral{waiter: w, Event: Event{
					Ref: s.ref(k), Type: eventNormal, Reason: deferReason(d), Action: "Defer", Note: deferNote(d, reason, u, s.lim),
				}})
			}
			waiting[k] = w
			continue
		}
		plan.Write = append(plan.Write, d)
	}
	s.waiting = waiting
	for _, k := range slices.SortedFunc(maps.Keys(s.refused), CompareNames) {
		if r := s.refused[k]; !r.told {
			plan.Refused = append(plan.Refused, r)
			r.told = true
			s.refused[k] = r
		}
	}
	return plan
}

// ref is the object reference of a known Workspace, for an Event, with its
// UID when the hook server or the watch told it. Called with the lock
// held.
func (s *State) ref(k types.NamespacedName) corev1.ObjectReference {
	if e, ok := s.workspaces[k]; ok && e.uid != "" {
		return workspaceRef(e)
	}
	ref := workspaceRef(&wsEntry{name: k})
	if w, ok := s.watched[k]; ok {
		ref.UID = w.uid
	}
	return ref
}

// inLine returns the workspaces with a directive in the order their
// directives are admitted: those waiting longest first, then by name.
// Called with the lock held.
func (s *State) inLine(now time.Time) []types.NamespacedName {
	since := func(k types.NamespacedName) time.Time {
		if w, ok := s.waiting[k]; ok {
			return w.since
		}
		return now
	}
	return slices.SortedFunc(maps.Keys(s.directives), func(a, b types.NamespacedName) int {
		return cmp.Or(since(a).Compare(since(b)), CompareNames(a, b))
	})
}

// deferReason is the reason of the Event announcing a directive's wait.
func deferReason(d ccapi.Directive) string {
	if d.Action == ccapi.ActionIdle {
		return "IdleDeferred"
	}
	return "RestartDeferred"
}

// StopWaiting forgets the waiting directives: this reporter no longer
// writes directives (another replica's does).
func (s *State) StopWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.waiting)
}

// Written records that d is on its Workspace, written at now (or that its
// Workspace does not exist, which no retry will change: began is false).
// Both the hook server's view of the workspace and the watch's learn when
// it began.
func (s *State) Written(d ccapi.Directive, began bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	if s.directives[k] == d {
		s.applied[k] = d
	}
	if !began {
		return
	}
	if e, ok := s.workspaces[k]; ok {
		e.pace.began(d, e.facts.WantedArtifactHash, now)
	}
	if w, ok := s.watched[k]; ok {
		w.pace.began(d, w.facts.WantedArtifactHash, now)
	}
}
