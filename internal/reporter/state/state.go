package state

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons an observation or a report is dropped, the values of the reason
// label of formspec_reporter_dropped_observations_total.
const (
	DropWorkspaceLimit = "workspace_limit"
	DropTombstoneLimit = "tombstone_limit"
	DropNodeLimit      = "node_limit"
	DropPodLimit       = "pod_limit"
	DropClaimLimit     = "claim_limit"
	DropDirectiveLimit = "directive_limit"
	DropAutoScaleLimit = "autoscale_limit"
	DropInvalid        = "invalid"
	DropRejected       = "rejected"
)

// Limits bound everything the state holds. None of them depends on how long
// Cluster Control is unreachable: workspace reports are coalesced to one per
// workspace, tombstones are capped, nodes, pods and claims are latest-state
// maps that age out.
type Limits struct {
	Workspaces, Tombstones, Nodes, Pods, Claims int
	// NodeStale, PodStale and ClaimStale are how long a node, a pod or a
	// claim may go unobserved before it is forgotten.
	NodeStale, PodStale, ClaimStale time.Duration
	// Restart and Idle pace the directives that take pods down
	// (budget.go).
	Restart, Idle Budget
}

// State is what the reporter knows. Every method takes the lock; none does
// I/O.
type State struct {
	lim  Limits
	drop func(reason string)

	mu         sync.Mutex
	workspaces map[types.NamespacedName]*wsEntry
	// tombstones counts the deleted workspaces in workspaces whose deletion
	// Cluster Control has not acknowledged yet; tombstoneGen changes with
	// them, for the Tombstone file.
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
	refused map[types.NamespacedName]Refusal
	waiting map[types.NamespacedName]waiter
	// watched are the Workspaces the reporter's watch sees (watch.go);
	// watchSynced is set once it has listed them all, and the budget
	// counts from them from then on. classZero is each ClusterClass's
	// scaleToZero, from the hook server's observations.
	watched     map[types.NamespacedName]*watchedEntry
	watchSynced bool
	classZero   map[string]bool
}

// New returns an empty state bounded by lim; drop is told the reason of
// every observation or report dropped (the Drop constants).
func New(lim Limits, drop func(string)) *State {
	return &State{
		lim:        lim,
		drop:       drop,
		workspaces: map[types.NamespacedName]*wsEntry{},
		directives: map[types.NamespacedName]ccapi.Directive{},
		applied:    map[types.NamespacedName]ccapi.Directive{},
		refused:    map[types.NamespacedName]Refusal{},
		waiting:    map[types.NamespacedName]waiter{},
		watched:    map[types.NamespacedName]*watchedEntry{},
		classZero:  map[string]bool{},
		classes:    map[string]int32{},
		nodes:      map[string]*nodeEntry{},
		pods:       map[types.NamespacedName]*podEntry{},
		claims:     map[types.NamespacedName]*claimEntry{},
	}
}

// CompareNames orders namespaced names by namespace, then name: what the
// state lists, it lists in this order.
func CompareNames(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// Counts reports the sizes of the state, for metrics and tests.
type Counts struct {
	Workspaces, Tombstones, Pending, Queue, Directives, Nodes, Pods, Claims int
	// WaitingRestarts and WaitingIdles are the directives waiting for
	// their budget.
	WaitingRestarts, WaitingIdles int
}

func (s *State) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{Workspaces: len(s.workspaces) - s.tombstones, Tombstones: s.tombstones, Queue: len(s.queue),
		Directives: len(s.directives), Nodes: len(s.nodes), Pods: len(s.pods), Claims: len(s.claims)}
	for _, e := range s.workspaces {
		if e.dirty {
			c.Pending++
		}
	}
	for _, w := range s.waiting {
		if w.Directive.Action == ccapi.ActionIdle {
			c.WaitingIdles++
		} else {
			c.WaitingRestarts++
		}
	}
	return c
}

// String renders counts for test failure messages.
func (c Counts) String() string {
	return fmt.Sprintf("workspaces=%d tombstones=%d pending=%d queue=%d directives=%d nodes=%d pods=%d claims=%d waiting=%d+%d",
		c.Workspaces, c.Tombstones, c.Pending, c.Queue, c.Directives, c.Nodes, c.Pods, c.Claims, c.WaitingRestarts, c.WaitingIdles)
}
