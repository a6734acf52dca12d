package reporter

import (
	"maps"
	"slices"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
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
// written), idle and wake once the annotation is as asked, since whether
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
func (s *state) consume(k types.NamespacedName, e *wsEntry, now time.Time) bool {
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
	// refuseInvalid: the directive names no valid workspace or an action
	// this reporter does not know (the contract says to ignore those).
	refuseInvalid = "invalid"
	// refuseInvalidHash: a restart whose artifact hash is not "sha256:"
	// and 64 lowercase hex digits (v1alpha1.ArtifactHashPattern).
	refuseInvalidHash = "invalid_hash"
	// refuseForeignNamespace: a namespace in which the hook server has
	// synced no Workspace.
	refuseForeignNamespace = "foreign_namespace"
	// refuseUnknownWorkspace: a Workspace the hook server has not synced
	// (or whose deletion it saw), in a namespace it serves.
	refuseUnknownWorkspace = "unknown_workspace"
)

// refusal is a directive the reporter will not write, and why.
type refusal struct {
	d      ccapi.Directive
	reason string
	// told is set once the refusal has been counted and logged: each
	// directive is refused once, not on every poll.
	told bool
}

// check returns why a directive Cluster Control sent cannot be carried out
// whatever the cluster holds, or "".
func check(d ccapi.Directive) string {
	if d.Validate() != nil {
		return refuseInvalid
	}
	if d.Action == ccapi.ActionRestartRequired && !v1alpha1.ValidArtifactHash(d.ArtifactHash) {
		return refuseInvalidHash
	}
	return ""
}

// setDirectives replaces the directives with what Cluster Control holds
// now. A directive the workspace already carried out is consumed on the
// spot, which also covers a consumption report that was lost; a directive
// that is gone is withdrawn, and what it already wrote stays. A directive
// that fails check is refused and kept out. It reports whether any report
// became pending.
func (s *state) setDirectives(ds []ccapi.Directive, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directives = make(map[types.NamespacedName]ccapi.Directive, len(ds))
	refused := make(map[types.NamespacedName]refusal)
	queued := false
	for _, d := range ds {
		if len(s.directives)+len(refused) >= s.lim.workspaces {
			s.drop(dropDirectiveLimit)
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
		if r, ok := s.refused[k]; ok && r.d == d {
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
func (s *state) refusal(k types.NamespacedName, d ccapi.Directive, reason string) refusal {
	r := s.refused[k]
	return refusal{d: d, reason: reason, told: r.told && r.d == d && r.reason == reason}
}

// directivePlan is what one poll does with the directives: those to write
// now, and the refusals not reported yet.
type directivePlan struct {
	write   []ccapi.Directive
	refused []refusal
}

// toWrite plans the writes of this poll, sorted by workspace: the
// directives not written by this reporter yet and not already there as
// far as it has seen, for Workspaces it has seen, in namespaces it serves.
// The install serves every namespace (Metacontroller's controllers are
// cluster-wide), so the namespaces this reporter serves are those the
// hook server has synced a Workspace in: a directive for any other is
// refused as foreign, one for a Workspace not synced yet as unknown, and
// written once the hook server syncs it. Each refusal is reported once.
func (s *state) toWrite() directivePlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	served := map[string]bool{}
	for k, e := range s.workspaces {
		if e.live() {
			served[k.Namespace] = true
		}
	}
	var plan directivePlan
	for _, k := range slices.SortedFunc(maps.Keys(s.directives), compareNames) {
		d := s.directives[k]
		if s.applied[k] == d {
			continue
		}
		e := s.workspaces[k]
		switch {
		case !served[k.Namespace]:
			s.refused[k] = s.refusal(k, d, refuseForeignNamespace)
			continue
		case e == nil || !e.live():
			s.refused[k] = s.refusal(k, d, refuseUnknownWorkspace)
			continue
		}
		delete(s.refused, k)
		if annotated(d, e.facts) {
			s.applied[k] = d
			continue
		}
		plan.write = append(plan.write, d)
	}
	for _, k := range slices.SortedFunc(maps.Keys(s.refused), compareNames) {
		if r := s.refused[k]; !r.told {
			plan.refused = append(plan.refused, r)
			r.told = true
			s.refused[k] = r
		}
	}
	return plan
}

// written records that d is on its Workspace (or that its Workspace does
// not exist, which no retry will change).
func (s *state) written(d ccapi.Directive) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
	if s.directives[k] == d {
		s.applied[k] = d
	}
}
