package reporter

import (
	"maps"
	"slices"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
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

// setDirectives replaces the directives with what Cluster Control holds
// now. A directive the workspace already carried out is consumed on the
// spot, which also covers a consumption report that was lost; a directive
// that is gone is withdrawn, and what it already wrote stays. It reports
// whether any report became pending.
func (s *state) setDirectives(ds []ccapi.Directive, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directives = make(map[types.NamespacedName]ccapi.Directive, len(ds))
	queued := false
	for _, d := range ds {
		if d.Validate() != nil {
			continue
		}
		if len(s.directives) >= s.lim.workspaces {
			s.drop(dropDirectiveLimit)
			break
		}
		k := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		s.directives[k] = d
		if e, ok := s.workspaces[k]; ok && s.consume(k, e, now) {
			queued = true
		}
	}
	for k := range s.applied {
		if s.applied[k] != s.directives[k] {
			delete(s.applied, k)
		}
	}
	return queued
}

// toWrite returns the directives that still have to be written onto their
// Workspace, sorted: not written by this reporter yet, and not already
// there as far as it has seen. A workspace this reporter has not seen gets
// the write anyway; the patch is idempotent.
func (s *state) toWrite() []ccapi.Directive {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ccapi.Directive
	for _, k := range slices.SortedFunc(maps.Keys(s.directives), compareNames) {
		d := s.directives[k]
		if s.applied[k] == d {
			continue
		}
		if e, ok := s.workspaces[k]; ok && !e.deleted && e.statusJS != nil && annotated(d, e.facts) {
			s.applied[k] = d
			continue
		}
		out = append(out, d)
	}
	return out
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
