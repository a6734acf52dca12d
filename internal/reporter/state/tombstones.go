package state

import (
	"maps"
	"slices"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"k8s.io/apimachinery/pkg/types"
)

// Tombstone is a deletion Cluster Control has not acknowledged yet, as
// kept in the Tombstone file.
type Tombstone struct {
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid,omitempty"`
	ObservedAt time.Time `json:"observedAt"`
}

// tombstones lists the unacknowledged deletions, sorted, and a generation
// that changes whenever the list may have.
func (s *State) TombstoneList() ([]Tombstone, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Tombstone
	for _, k := range slices.SortedFunc(maps.Keys(s.workspaces), CompareNames) {
		if e := s.workspaces[k]; e.deleted {
			out = append(out, Tombstone{Namespace: e.name.Namespace, Name: e.name.Name, UID: e.uid, ObservedAt: ccapi.Stamp(e.observedAt)})
		}
	}
	return out, s.tombstoneGen
}

// RestoreTombstones queues the deletions a previous run had not delivered,
// each with the time it was observed.
func (s *State) RestoreTombstones(ts []Tombstone, now time.Time) {
	for _, t := range ts {
		if t.Namespace == "" || t.Name == "" {
			continue
		}
		at := t.ObservedAt
		if at.IsZero() {
			at = now
		}
		s.DeleteWorkspace(&observation.WorkspaceRef{Namespace: t.Namespace, Name: t.Name, UID: t.UID}, at)
	}
}
