package state

import (
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"k8s.io/apimachinery/pkg/types"
)

// claimEntry is the last decision on a ResourceClaim, kept to tell a
// change (denied, granted, rotated) from a repeat.
type claimEntry struct {
	granted  bool
	reason   string
	version  string
	exposed  bool
	legacy   bool
	lastSeen time.Time
}

// ObserveClaim records a claim decision and returns the Events it calls
// for.
func (s *State) ObserveClaim(c *observation.ClaimDecision, now time.Time) []Event {
	k := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.claims[k]
	events := claimEvents(c, prev, now)
	if !ok {
		if len(s.claims) >= s.lim.Claims {
			s.drop(DropClaimLimit)
			return events
		}
		prev = &claimEntry{}
		s.claims[k] = prev
	}
	prev.granted, prev.reason, prev.version, prev.exposed, prev.lastSeen = c.Granted, c.Reason, c.CredentialsVersion, c.Exposed != nil, now
	prev.legacy = c.LegacySignature != nil
	return events
}

// forgetStaleClaims forgets the claims not observed within their staleness
// window; it runs with every node report. Called with the lock held.
func (s *State) forgetStaleClaims(now time.Time) {
	for k, c := range s.claims {
		if now.Sub(c.lastSeen) > s.lim.ClaimStale {
			delete(s.claims, k)
		}
	}
}
