package reporter

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons an observation is dropped, the values of the reason label.
const (
	dropWorkspaceLimit = "workspace_limit"
	dropTombstoneLimit = "tombstone_limit"
	dropNodeLimit      = "node_limit"
	dropPodLimit       = "pod_limit"
	dropClaimLimit     = "claim_limit"
	dropDirectiveLimit = "directive_limit"
	dropAutoScaleLimit = "autoscale_limit"
	dropInvalid        = "invalid"
	dropRejected       = "rejected"
)

// limits bound everything the state holds. None of them depends on how long
// Cluster Control is unreachable: workspace reports are coalesced to one per
// workspace, tombstones are capped, nodes, pods and claims are latest-state
// maps that age out.
type limits struct {
	workspaces, tombstones, nodes, pods, claims int
	nodeStale, podStale, claimStale             time.Duration
	// restart and idle pace the directives that take pods down
	// (budget.go).
	restart, idle Budget
}

// state is what the reporter knows. Every method takes the lock; none does
// I/O.
type state struct {
	lim  limits
	drop func(reason string)

	mu         sync.Mutex
	workspaces map[types.NamespacedName]*wsEntry
	// tombstones counts the deleted workspaces in workspaces whose deletion
	// Cluster Control has not acknowledged yet; tombstoneGen changes with
	// them, for the tombstone file.
	tombstones   int
	tombstoneGen uint64
	// queue holds the keys of workspaces with an unsent report, oldest
	// first, each at most once, so its length is bounded by the number of
	// workspaces and tombstones.
	queue []types.NamespacedName
	// directives are Cluster Control's directives not yet consumed, by
	// workspace; applied are those already written onto their
	// Workspace, so that each is written once, not on every poll.
	directives map[types.NamespacedName]ccapi.Directive
	applied    map[types.NamespacedName]ccapi.Directive
	classes    map[string]int32      // ClusterClass name → maxWorkspaces
	nodes      map[string]*nodeEntry // by Node name
	pods       map[types.NamespacedName]*podEntry
	claims     map[types.NamespacedName]*claimEntry

	// refused are the directives this reporter will not write, and why
	// (directives.go); waiting those that wait for their budget
	// (budget.go).
	refused map[types.NamespacedName]refusal
	waiting map[types.NamespacedName]waiter
	// watched are the Workspaces the reporter's watch sees (watch.go);
	// watchSynced is set once it has listed them all, and the budget
	// counts from them from then on. classZero is each ClusterClass's
	// scaleToZero, from the hook server's observations.
	watched     map[types.NamespacedName]*watchedEntry
	watchSynced bool
	classZero   map[string]bool
}

func newState(lim limits, drop func(string)) *state {
	return &state{
		lim:        lim,
		drop:       drop,
		workspaces: map[types.NamespacedName]*wsEntry{},
		directives: map[types.NamespacedName]ccapi.Directive{},
		applied:    map[types.NamespacedName]ccapi.Directive{},
		refused:    map[types.NamespacedName]refusal{},
		waiting:    map[types.NamespacedName]waiter{},
		watched:    map[types.NamespacedName]*watchedEntry{},
		classZero:  map[string]bool{},
		classes:    map[string]int32{},
		nodes:      map[string]*nodeEntry{},
		pods:       map[types.NamespacedName]*podEntry{},
		claims:     map[types.NamespacedName]*claimEntry{},
	}
}

// compareNames orders namespaced names by namespace, then name: what the
// state lists, it lists in this order.
func compareNames(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// counts reports the sizes of the state, for metrics and tests.
type counts struct {
	Workspaces, Tombstones, Pending, Queue, Directives, Nodes, Pods, Claims int
	// WaitingRestarts and WaitingIdles are the directives waiting for
	// their budget.
	WaitingRestarts, WaitingIdles int
}

func (s *state) counts() counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := counts{Workspaces: len(s.workspaces) - s.tombstones, Tombstones: s.tombstones, Queue: len(s.queue),
		Directives: len(s.directives), Nodes: len(s.nodes), Pods: len(s.pods), Claims: len(s.claims)}
	for _, e := range s.workspaces {
		if e.dirty {
			c.Pending++
		}
	}
	for _, w := range s.waiting {
		if w.d.Action == ccapi.ActionIdle {
			c.WaitingIdles++
		} else {
			c.WaitingRestarts++
		}
	}
	return c
}

// String renders counts for test failure messages.
func (c counts) String() string {
	return fmt.Sprintf("workspaces=%d tombstones=%d pending=%d queue=%d directives=%d nodes=%d pods=%d claims=%d waiting=%d+%d",
		c.Workspaces, c.Tombstones, c.Pending, c.Queue, c.Directives, c.Nodes, c.Pods, c.Claims, c.WaitingRestarts, c.WaitingIdles)
}
