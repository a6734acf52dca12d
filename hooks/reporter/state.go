package reporter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/hooks/clustercontrol/ccapi"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons an observation is dropped, the values of the reason label.
const (
	dropWorkspaceLimit = "workspace_limit"
	dropNodeLimit      = "node_limit"
	dropPodLimit       = "pod_limit"
	dropDirectiveLimit = "directive_limit"
	dropInvalid        = "invalid"
	dropRejected       = "rejected"
)

// limits bound everything the state holds. None of them depends on how long
// Cluster Control is unreachable: workspace reports are coalesced to one per
// workspace, nodes and pods are a latest-state map that ages out.
type limits struct {
	workspaces, nodes, pods int
	nodeStale, podStale     time.Duration
}

// state is what the reporter knows. Every method takes the lock; none does
// I/O.
type state struct {
	lim  limits
	drop func(reason string)

	mu         sync.Mutex
	workspaces map[string]*wsEntry
	// queue holds the keys of workspaces with an unsent report, oldest
	// first, each at most once, so its length is bounded by lim.workspaces.
	queue      []string
	directives map[string]string // workspace key → artifact hash
	nodes      map[string]*nodeEntry
	pods       map[string]*podEntry
}

// wsEntry is one workspace's latest known state and its report.
type wsEntry struct {
	ns, name string
	// status is the last observed status, encoded, to detect change; nil
	// once the workspace is deleted.
	status   *ccapi.WorkspaceStatus
	statusJS []byte
	deleted  bool
	// consumed is the artifact hash of a restart_required directive whose
	// consumption has not yet been acknowledged by Cluster Control.
	consumed string
	// version counts changes; a send acknowledges only the version it
	// carried, so a change during the send is not lost.
	version uint64
	body    []byte
	key     string
	dirty   bool
	queued  bool
}

type nodeEntry struct {
	health   ccapi.NodeHealth
	lastSeen time.Time
}

type podEntry struct {
	workspace string // namespace/name
	node      string
	live      bool
	lastSeen  time.Time
}

func newState(lim limits, drop func(string)) *state {
	return &state{
		lim:        lim,
		drop:       drop,
		workspaces: map[string]*wsEntry{},
		directives: map[string]string{},
		nodes:      map[string]*nodeEntry{},
		pods:       map[string]*podEntry{},
	}
}

func wsKey(ns, name string) string { return ns + "/" + name }

// observeWorkspace records a workspace's status. It reports whether a new
// report is now pending.
func (s *state) observeWorkspace(o *observation.WorkspaceStatus, now time.Time) bool {
	// A copy, so the entry does not alias the observation's struct; the
	// slices inside are shared, as nothing mutates them after decoding.
	st := new(o.WorkspaceStatus)
	js, err := json.Marshal(st)
	if err != nil {
		s.drop(dropInvalid)
		return false
	}
	k := wsKey(o.Namespace, o.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(o.Namespace, o.Name)
	if e == nil {
		return false
	}
	changed := e.deleted || !bytes.Equal(e.statusJS, js)
	e.status, e.statusJS, e.deleted = st, js, false
	if h, ok := s.directives[k]; ok && h != "" && h == o.ArtifactHash {
		delete(s.directives, k)
		if e.consumed != h {
			e.consumed = h
			changed = true
		}
	}
	if !changed {
		return false
	}
	s.bump(k, e, now)
	return true
}

// deleteWorkspace records a workspace's deletion.
func (s *state) deleteWorkspace(ns, name string, now time.Time) bool {
	k := wsKey(ns, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.directives, k)
	if e, ok := s.workspaces[k]; ok && e.deleted {
		return false
	}
	e := s.entry(ns, name)
	if e == nil {
		return false
	}
	e.status, e.statusJS, e.deleted, e.consumed = nil, nil, true, ""
	s.bump(k, e, now)
	return true
}

// entry returns the workspace's entry, creating it within the limit. Called
// with the lock held.
func (s *state) entry(ns, name string) *wsEntry {
	k := wsKey(ns, name)
	if e, ok := s.workspaces[k]; ok {
		return e
	}
	if len(s.workspaces) >= s.lim.workspaces {
		s.drop(dropWorkspaceLimit)
		return nil
	}
	e := &wsEntry{ns: ns, name: name}
	s.workspaces[k] = e
	return e
}

// bump turns the entry's current state into a new report and queues it.
// The body is fixed here, so every retry of this version carries the same
// bytes and the same Idempotency-Key. Called with the lock held.
func (s *state) bump(k string, e *wsEntry, now time.Time) {
	rep := ccapi.WorkspaceStatusReport{
		Namespace:  e.ns,
		Name:       e.name,
		ObservedAt: ccapi.Stamp(now),
		Deleted:    e.deleted,
		Status:     e.status,
	}
	if e.consumed != "" {
		rep.RestartConsumed = &ccapi.RestartConsumed{ArtifactHash: e.consumed}
	}
	body, err := json.Marshal(rep)
	if err != nil {
		// Only a type the encoder cannot handle gets here; the status was
		// encoded successfully a moment ago, so this is unreachable.
		s.drop(dropInvalid)
		return
	}
	e.version++
	e.body, e.key, e.dirty = body, idempotencyKey(body), true
	if !e.queued {
		e.queued = true
		s.queue = append(s.queue, k)
	}
}

// idempotencyKey derives the key from the body: retries of one report share
// it, and two different reports (the body carries observedAt) never do.
func idempotencyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// pendingReport is one workspace report taken for sending.
type pendingReport struct {
	wsKey    string
	version  uint64
	consumed string
	body     []byte
	key      string
}

// next takes the oldest pending report.
func (s *state) next() (pendingReport, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 {
		k := s.queue[0]
		s.queue[0] = ""
		s.queue = s.queue[1:]
		e, ok := s.workspaces[k]
		if !ok {
			continue
		}
		e.queued = false
		if !e.dirty {
			continue
		}
		return pendingReport{wsKey: k, version: e.version, consumed: e.consumed, body: e.body, key: e.key}, true
	}
	// Let the backing array go once drained, so a burst does not pin it.
	s.queue = nil
	return pendingReport{}, false
}

// finish records how sending p went.
func (s *state) finish(p pendingReport, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workspaces[p.wsKey]
	if !ok {
		return
	}
	switch o {
	case sent:
		if p.consumed != "" && e.consumed == p.consumed {
			e.consumed = ""
		}
		if e.version != p.version {
			return
		}
		e.dirty = false
		if e.deleted {
			delete(s.workspaces, p.wsKey)
		}
	case rejected:
		if e.version != p.version {
			return
		}
		e.dirty = false
		if e.deleted {
			delete(s.workspaces, p.wsKey)
		}
	case retry:
		// To the back of the queue: one report Cluster Control keeps failing
		// on must not hold up every other workspace.
		if e.dirty && !e.queued {
			e.queued = true
			s.queue = append(s.queue, p.wsKey)
		}
	}
}

// setDirectives replaces the restart directives with what Cluster Control
// holds now. A directive the workspace already satisfies is consumed on the
// spot, which also covers a consumption report that was lost. It reports
// whether any report became pending.
func (s *state) setDirectives(ds []ccapi.Directive, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]string, len(ds))
	queued := false
	for _, d := range ds {
		if d.Action != ccapi.ActionRestartRequired || d.ArtifactHash == "" || d.Namespace == "" || d.Name == "" {
			continue
		}
		k := wsKey(d.Namespace, d.Name)
		if e, ok := s.workspaces[k]; ok && !e.deleted && e.status != nil && e.status.ArtifactHash == d.ArtifactHash {
			if e.consumed != d.ArtifactHash {
				e.consumed = d.ArtifactHash
				s.bump(k, e, now)
				queued = true
			}
			continue
		}
		if len(next) >= s.lim.workspaces {
			s.drop(dropDirectiveLimit)
			continue
		}
		next[k] = d.ArtifactHash
	}
	s.directives = next
	return queued
}

// directive returns the artifact hash a workspace should roll to, if any.
func (s *state) directive(ns, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.directives[wsKey(ns, name)]
	return h, ok
}

// observeNode records a node's latest state.
func (s *state) observeNode(n *corev1.Node, now time.Time) {
	h := summarizeNode(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.nodes[n.Name]
	if !ok {
		if len(s.nodes) >= s.lim.nodes {
			s.drop(dropNodeLimit)
			return
		}
		e = &nodeEntry{}
		s.nodes[n.Name] = e
	}
	e.health, e.lastSeen = h, now
}

// observePod records where a workspace pod runs.
func (s *state) observePod(p *observation.PodPlacement, now time.Time) {
	k := wsKey(p.Namespace, p.Name)
	live := !p.Terminating && p.NodeName != "" && (p.Phase == corev1.PodPending || p.Phase == corev1.PodRunning || p.Phase == "")
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.pods[k]
	if !ok {
		if !live {
			// Nothing to count and nothing to forget: keep no entry.
			return
		}
		if len(s.pods) >= s.lim.pods {
			s.drop(dropPodLimit)
			return
		}
		e = &podEntry{}
		s.pods[k] = e
	}
	if !live {
		delete(s.pods, k)
		return
	}
	e.workspace, e.node, e.live, e.lastSeen = wsKey(p.Namespace, p.Workspace), p.NodeName, live, now
}

// nodeReport builds the node-health body and forgets nodes and pods that
// have not been observed within their staleness window: Metacontroller does
// not tell a decorator hook about deletions, so silence is the signal.
func (s *state) nodeReport(reporter string, now time.Time) ccapi.NodeHealthReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	perNode := map[string]map[string]bool{}
	for k, p := range s.pods {
		if now.Sub(p.lastSeen) > s.lim.podStale {
			delete(s.pods, k)
			continue
		}
		if perNode[p.node] == nil {
			perNode[p.node] = map[string]bool{}
		}
		perNode[p.node][p.workspace] = true
	}
	rep := ccapi.NodeHealthReport{Reporter: reporter, SentAt: ccapi.Stamp(now), Nodes: []ccapi.NodeHealth{}}
	for name, n := range s.nodes {
		if now.Sub(n.lastSeen) > s.lim.nodeStale {
			delete(s.nodes, name)
			continue
		}
		h := n.health
		h.ObservedAt = ccapi.Stamp(n.lastSeen)
		for ws := range perNode[name] {
			h.Workspaces = append(h.Workspaces, ws)
		}
		slices.Sort(h.Workspaces)
		h.WorkspaceCount = len(h.Workspaces)
		rep.Nodes = append(rep.Nodes, h)
	}
	slices.SortFunc(rep.Nodes, func(a, b ccapi.NodeHealth) int { return strings.Compare(a.Name, b.Name) })
	return rep
}

// counts reports the sizes of the state, for metrics and tests.
type counts struct {
	Workspaces, Pending, Queue, Directives, Nodes, Pods int
}

func (s *state) counts() counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := counts{Workspaces: len(s.workspaces), Queue: len(s.queue), Directives: len(s.directives), Nodes: len(s.nodes), Pods: len(s.pods)}
	for _, e := range s.workspaces {
		if e.dirty {
			c.Pending++
		}
	}
	return c
}

// degradingConditions are the node conditions that make a node degraded
// when True; Ready makes it degraded when anything but True.
var degradingConditions = map[corev1.NodeConditionType]bool{
	corev1.NodeMemoryPressure:     true,
	corev1.NodeDiskPressure:       true,
	corev1.NodePIDPressure:        true,
	corev1.NodeNetworkUnavailable: true,
}

// nodeLabelPrefix selects the labels Cluster Control places by.
const nodeLabelPrefix = "formspec.dev/"

// summarizeNode reduces a Node to what Cluster Control is told.
func summarizeNode(n *corev1.Node) ccapi.NodeHealth {
	h := ccapi.NodeHealth{
		Name:          n.Name,
		Health:        ccapi.HealthHealthy,
		Unschedulable: n.Spec.Unschedulable,
		Capacity:      resources(n.Status.Capacity),
		Allocatable:   resources(n.Status.Allocatable),
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
		if degradingConditions[c.Type] && c.Status == corev1.ConditionTrue {
			h.Health = ccapi.HealthDegraded
		}
		h.Conditions = append(h.Conditions, ccapi.NodeCondition{
			Type:               string(c.Type),
			Status:             string(c.Status),
			Reason:             c.Reason,
			Message:            c.Message,
			LastTransitionTime: metav1.NewTime(c.LastTransitionTime.UTC()),
		})
	}
	if !ready {
		h.Health = ccapi.HealthDegraded
	}
	slices.SortFunc(h.Conditions, func(a, b ccapi.NodeCondition) int { return strings.Compare(a.Type, b.Type) })
	for k, v := range n.Labels {
		if strings.HasPrefix(k, nodeLabelPrefix) {
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[k] = v
		}
	}
	return h
}

func resources(l corev1.ResourceList) ccapi.Resources {
	var r ccapi.Resources
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.CPU = q.String()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.Memory = q.String()
	}
	return r
}

// String renders counts for test failure messages.
func (c counts) String() string {
	return fmt.Sprintf("workspaces=%d pending=%d queue=%d directives=%d nodes=%d pods=%d", c.Workspaces, c.Pending, c.Queue, c.Directives, c.Nodes, c.Pods)
}
