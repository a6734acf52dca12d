package state

import (
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"k8s.io/apimachinery/pkg/types"
)

// Directive returns the action of the directive Cluster Control holds for
// a workspace, consumed or not, as of its last answer.
func (s *State) Directive(k types.NamespacedName) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.directives[k]; ok {
		return d.Action
	}
	return s.applied[k].Action
}

// maxAutoScales bounds the wakes and idles a workspace keeps for Cluster
// Control while it does not take them.
const maxAutoScales = 8

// AutoScaled queues a report to Cluster Control saying the reporter woke or
// idled a workspace, and why. It reports false, and queues nothing, for a
// workspace the state holds no status of: Cluster Control learns of it
// from its first status, which shows it idle or not.
func (s *State) AutoScaled(k types.NamespacedName, as ccapi.AutoScale, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workspaces[k]
	if !ok || e.deleted || e.statusJS == nil {
		return false
	}
	if len(e.autoScales) >= maxAutoScales {
		// Cluster Control has been away through many wakes and idles:
		// the oldest matter least.
		e.autoScales = e.autoScales[1:]
		s.drop(DropAutoScaleLimit)
	}
	e.autoScales = append(e.autoScales, as)
	s.bump(k, e, now)
	return true
}
