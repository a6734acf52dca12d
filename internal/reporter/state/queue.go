package state

import (
	"encoding/json"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"k8s.io/apimachinery/pkg/types"
)

// bump makes the entry's current state a new version to report and queues
// it. Called with the lock held.
func (s *State) bump(k types.NamespacedName, e *wsEntry, now time.Time) {
	e.version++
	e.reportedAt, e.dirty = now, true
	if !e.queued {
		e.queued = true
		s.queue = append(s.queue, k)
	}
}

// PendingReport is one workspace report taken for sending.
type PendingReport struct {
	workspace types.NamespacedName
	version   uint64
	consumed  *ccapi.DirectiveConsumed
	autoScale *ccapi.AutoScale
	// Body is the report, as sent: the same bytes for every retry.
	Body []byte
}

// Next takes the oldest pending report and encodes it. The body is built
// from fields fixed per version, so a retry sends the same bytes.
func (s *State) Next() (PendingReport, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 {
		k := s.queue[0]
		s.queue[0] = types.NamespacedName{}
		s.queue = s.queue[1:]
		e, ok := s.workspaces[k]
		if !ok {
			continue
		}
		e.queued = false
		if !e.dirty {
			continue
		}
		body, err := reportBody(e)
		if err != nil {
			// Only a status the encoder produced a moment ago gets here, so
			// this is unreachable; drop rather than loop on it.
			s.drop(DropInvalid)
			e.dirty = false
			continue
		}
		return PendingReport{workspace: k, version: e.version, consumed: e.consumed, autoScale: firstAutoScale(e), Body: body}, true
	}
	// Let the backing array go once drained, so a burst does not pin it.
	s.queue = nil
	return PendingReport{}, false
}

// firstAutoScale is the wake or idle a report of e carries: the oldest not
// yet acknowledged.
func firstAutoScale(e *wsEntry) *ccapi.AutoScale {
	if len(e.autoScales) == 0 {
		return nil
	}
	return &e.autoScales[0]
}

func reportBody(e *wsEntry) ([]byte, error) {
	rep := ccapi.WorkspaceStatusReport{
		Namespace:         e.name.Namespace,
		Name:              e.name.Name,
		ObservedAt:        ccapi.Stamp(e.observedAt),
		ReportedAt:        ccapi.Stamp(e.reportedAt),
		Deleted:           e.deleted,
		DirectiveConsumed: e.consumed,
		AutoScale:         firstAutoScale(e),
	}
	if !e.deleted {
		rep.Status = new(ccapi.WorkspaceStatus)
		if err := json.Unmarshal(e.statusJS, rep.Status); err != nil {
			return nil, err
		}
	}
	return json.Marshal(rep)
}

// Requeue puts p's workspace back at the end of the queue after a send
// that is to be retried: one report Cluster Control keeps failing on must
// not hold up every other workspace.
func (s *State) Requeue(p PendingReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workspaces[p.workspace]
	if ok && e.dirty && !e.queued {
		e.queued = true
		s.queue = append(s.queue, p.workspace)
	}
}

// Done records that sending p is over: sent (Cluster Control took it) or
// rejected for good. Either way this version is done.
func (s *State) Done(p PendingReport, sent bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workspaces[p.workspace]
	if !ok {
		return
	}
	if sent && p.consumed != nil && e.consumed != nil && *e.consumed == *p.consumed {
		e.consumed = nil
	}
	if sent && p.autoScale != nil && len(e.autoScales) > 0 && e.autoScales[0] == *p.autoScale {
		e.autoScales = e.autoScales[1:]
		if len(e.autoScales) == 0 {
			e.autoScales = nil
		} else if e.version == p.version {
			// The next one goes in a report of its own.
			s.bump(p.workspace, e, now)
			return
		}
	}
	if e.version != p.version {
		return
	}
	e.dirty = false
	if e.deleted {
		delete(s.workspaces, p.workspace)
		s.tombstones--
		s.tombstoneGen++
	}
}
