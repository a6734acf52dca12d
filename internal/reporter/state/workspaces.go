package state

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// wsEntry is one workspace's latest known state and its pending report. It
// keeps the status encoded, once, and the few facts the reporter acts on,
// not the observation: about 2 KiB for a typical workspace.
type wsEntry struct {
	name types.NamespacedName
	uid  types.UID
	// statusJS is the encoded ccapi.WorkspaceStatus; nil once deleted.
	statusJS []byte
	// observedAt is when the current state was observed: the hook's time
	// (observation.WorkspaceStatus.ObservedAt), or when it arrived for an
	// observation without one. A re-report keeps it, so it never passes
	// off old state as new.
	observedAt time.Time
	facts      wsFacts
	// pace is what the directive budget knows of the workspace.
	pace    pace
	deleted bool
	// consumed is a directive this workspace carried out whose
	// consumption Cluster Control has not acknowledged yet.
	consumed *ccapi.DirectiveConsumed
	// autoScales are the wakes and idles the reporter decided (package wake)
	// that Cluster Control has not acknowledged yet, oldest first, at most
	// maxAutoScales: a report carries the first, and once it is sent the
	// next goes, so a wake followed by an idle during an outage reaches
	// Cluster Control as both.
	autoScales []ccapi.AutoScale
	// version counts changes; a send acknowledges only the version it
	// carried, so a change during the send is not lost. reportedAt is fixed
	// per version, so every retry of one version has the same bytes and the
	// same Idempotency-Key.
	version    uint64
	reportedAt time.Time
	dirty      bool
	queued     bool
}

// live reports whether the workspace exists as far as the reporter knows:
// the hook server has synced it, and has not seen its teardown finish.
func (e *wsEntry) live() bool { return !e.deleted && e.statusJS != nil }

// wsFacts are what the reporter acts on in a workspace observation: its
// milestones, the same facts by which the hand-off decides which statuses
// it may merge, so every change of them reaches the reporter.
type wsFacts struct {
	observation.Milestones
	// scaleToZero is the class's: an idle takes the pods down.
	scaleToZero bool
}

// classMissing reports a workspace degraded because its ClusterClass is
// missing.
func (f wsFacts) classMissing() bool { return f.DegradedReason == v1alpha1.ReasonClusterClassNotFound }

// ObserveWorkspace records a workspace's status. It reports whether a new
// report is now pending, and the Events the change calls for.
func (s *State) ObserveWorkspace(o *observation.WorkspaceStatus, now time.Time) (bool, []Event) {
	js, err := json.Marshal(wireStatus(o))
	if err != nil {
		s.drop(DropInvalid)
		return false, nil
	}
	f := factsOf(o)
	k := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(k)
	if e == nil {
		return false, nil
	}
	var prev *wsFacts
	if e.statusJS != nil {
		prev = new(e.facts)
	}
	if e.deleted {
		// Deleted and created again under the same name.
		e.deleted = false
		s.tombstones--
		s.tombstoneGen++
	}
	// A status the hook's sync changed in the API server is reported even
	// when this reporter already holds the same one: Cluster Control may
	// have had another state from the other replica's reporter since.
	changed := !bytes.Equal(e.statusJS, js)
	report := changed || o.StatusChanged
	if report {
		e.statusJS, e.observedAt = js, stamp(o.ObservedAt, now)
	}
	e.pace.observe(prev, f, stamp(o.ObservedAt, now))
	e.facts = f
	if o.UID != "" {
		e.uid = o.UID
	}
	if o.Class != nil {
		s.classes[o.Class.Name] = o.Class.MaxWorkspaces
		s.classZero[o.Class.Name] = o.Class.ScaleToZero
	}
	events := workspaceEvents(workspaceRef(e), prev, f, o)
	if s.consume(k, e, now) {
		return true, events
	}
	if !report {
		return false, events
	}
	s.bump(k, e, now)
	return true, events
}

// stamp is an observation's time: the hook's, or now for an observation
// that carries none.
func stamp(observedAt, now time.Time) time.Time {
	if observedAt.IsZero() {
		return now
	}
	return observedAt
}

// wireStatus is what Cluster Control is told of a workspace's status.
func wireStatus(o *observation.WorkspaceStatus) ccapi.WorkspaceStatus {
	return ccapi.WorkspaceStatus{
		ClusterClass:       o.ClusterClass,
		ObservedGeneration: o.ObservedGeneration,
		Phase:              o.Phase,
		Conditions:         o.Conditions,
		Replicas:           o.Replicas,
		ReadyReplicas:      o.ReadyReplicas,
		UpdatedReplicas:    o.UpdatedReplicas,
		ArtifactHash:       o.ArtifactHash,
		Datastores:         o.Datastores,
	}
}

func factsOf(o *observation.WorkspaceStatus) wsFacts {
	return wsFacts{Milestones: o.Milestones(), scaleToZero: o.Class != nil && o.Class.ScaleToZero}
}

// DeleteWorkspace records a workspace's deletion, kept as a Tombstone until
// Cluster Control acknowledges it.
func (s *State) DeleteWorkspace(ref *observation.WorkspaceRef, now time.Time) (bool, []Event) {
	k := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.directives, k)
	delete(s.applied, k)
	e, ok := s.workspaces[k]
	if ok && e.deleted {
		return false, nil
	}
	if !ok {
		// Never seen alive by this reporter: the Tombstone is all there is.
		e = &wsEntry{name: k}
		s.workspaces[k] = e
	}
	if ref.UID != "" {
		e.uid = ref.UID
	}
	e.statusJS, e.deleted, e.consumed, e.autoScales, e.observedAt = nil, true, nil, nil, stamp(ref.ObservedAt, now)
	s.tombstones++
	s.tombstoneGen++
	s.bump(k, e, now)
	if s.tombstones > s.lim.Tombstones {
		s.evictOldestTombstone()
	}
	return true, []Event{{Ref: workspaceRef(e), Type: eventNormal, Reason: "TeardownFinished", Action: "Delete",
		Note: "all children are gone; the workspace is deleted"}}
}

// evictOldestTombstone forgets the deletion Cluster Control has been told
// nothing about for longest. It only runs when an outage has outlasted
// lim.Tombstones deletions. Called with the lock held.
func (s *State) evictOldestTombstone() {
	var oldest types.NamespacedName
	for k, e := range s.workspaces {
		if e.deleted && (oldest == (types.NamespacedName{}) || e.observedAt.Before(s.workspaces[oldest].observedAt)) {
			oldest = k
		}
	}
	if oldest != (types.NamespacedName{}) {
		delete(s.workspaces, oldest)
		s.tombstones--
		s.tombstoneGen++
		s.drop(DropTombstoneLimit)
	}
}

// entry returns the workspace's entry, creating it within the limit. Called
// with the lock held.
func (s *State) entry(k types.NamespacedName) *wsEntry {
	if e, ok := s.workspaces[k]; ok {
		return e
	}
	if len(s.workspaces)-s.tombstones >= s.lim.Workspaces {
		s.drop(DropWorkspaceLimit)
		return nil
	}
	e := &wsEntry{name: k}
	s.workspaces[k] = e
	return e
}

// Resync queues a fresh report of every live workspace that has none
// pending, so that a Cluster Control that lost its state gets it back. It
// returns how many it queued.
func (s *State) Resync(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range slices.SortedFunc(maps.Keys(s.workspaces), CompareNames) {
		e := s.workspaces[k]
		if e.deleted || e.dirty || e.statusJS == nil {
			continue
		}
		s.bump(k, e, now)
		n++
	}
	return n
}

// classUsage counts the live workspaces per ClusterClass, for the classes
// whose limit the reporter has seen, and forgets classes no workspace uses
// any more. Called with the lock held.
func (s *State) classUsage() []ccapi.ClassUsage {
	used := map[string]int{}
	for _, e := range s.workspaces {
		if !e.deleted && e.facts.Class != "" {
			used[e.facts.Class]++
		}
	}
	var out []ccapi.ClassUsage
	for _, name := range slices.Sorted(maps.Keys(s.classes)) {
		if used[name] == 0 {
			delete(s.classes, name)
			continue
		}
		out = append(out, ccapi.ClassUsage{Name: name, MaxWorkspaces: s.classes[name], WorkspaceCount: used[name]})
	}
	return out
}
