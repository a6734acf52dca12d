package state

import (
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"k8s.io/apimachinery/pkg/types"
)

// watchedEntry is what the budget knows of one Workspace from the watch.
type watchedEntry struct {
	uid   types.UID
	facts wsFacts
	pace  pace
}

// Watched is what the reporter's watch of Workspaces shows of one, all the
// budget needs: it counts from the watch once the watch has listed every
// Workspace (WatchListed), and from the hook server's observations until
// then.
type Watched struct {
	Name types.NamespacedName
	UID  types.UID
	// Milestones are the Workspace's requested hash, the hash its pods
	// run, its idle annotation and its phase, as the API server has them.
	Milestones observation.Milestones
	// HashSince and IdleSince are when the field managers owning the
	// formspec.dev/artifact-binary-hash and formspec.dev/idle annotations
	// last wrote (managedFields), on the API server's clock: when the
	// restart or the idle began, at the latest.
	HashSince, IdleSince time.Time
}

// WatchWorkspace records what the watch shows of a Workspace. One first
// seen began its restart or idle when its annotation was last written;
// later changes begin them when they are seen.
func (s *State) WatchWorkspace(w Watched, now time.Time) {
	k := w.Name
	facts := wsFacts{Milestones: w.Milestones}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.watched[k]
	switch {
	case !ok && len(s.watched) >= s.lim.Workspaces:
		s.drop(DropWorkspaceLimit)
		return
	case !ok:
		e = &watchedEntry{}
		s.watched[k] = e
		if facts.WantedArtifactHash != "" {
			e.pace.restartAt = w.HashSince
		}
		if facts.Idle {
			e.pace.idleAt = w.IdleSince
		}
	default:
		e.pace.observe(&e.facts, facts, now)
	}
	e.uid, e.facts = w.UID, facts
}

// UnwatchWorkspace forgets a Workspace that is gone.
func (s *State) UnwatchWorkspace(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watched, types.NamespacedName{Namespace: namespace, Name: name})
}

// WatchListed records that the watch has listed every Workspace: the
// budget counts from it from now on.
func (s *State) WatchListed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchSynced = true
}

// Listed reports whether the watch has listed every Workspace, so that
// the budget counts from it.
func (s *State) Listed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchSynced
}
