package reporter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// state is what the reporter knows. Every method takes the lock; none does
// I/O.
type state struct {
	lim  limits
	drop func(reason string)

	mu         sync.Mutex
	workspaces map[string]*wsEntry
	// tombstones counts the deleted workspaces in workspaces whose deletion
	// Cluster Control has not acknowledged yet; tombstoneGen changes with
	// them, for the tombstone file.
	tombstones   int
	tombstoneGen uint64
	// queue holds the keys of workspaces with an unsent report, oldest
	// first, each at most once, so its length is bounded by the number of
	// workspaces and tombstones.
	queue []string
	// directives are Cluster Control's directives not yet consumed, by
	// workspace key; applied are those already written onto their
	// Workspace, so that each is written once, not on every poll.
	directives map[string]ccapi.Directive
	applied    map[string]ccapi.Directive
	classes    map[string]int32 // ClusterClass name → maxWorkspaces
	nodes      map[string]*nodeEntry
	pods       map[string]*podEntry
	claims     map[string]*claimEntry
}

// wsEntry is one workspace's latest known state and its pending report. It
// keeps the status encoded, once, and the few facts the reporter acts on,
// not the observation: about 2 KiB for a typical workspace.
type wsEntry struct {
	ns, name string
	uid      types.UID
	// statusJS is the encoded ccapi.WorkspaceStatus; nil once deleted.
	statusJS []byte
	// observedAt is when the current state arrived. A re-report keeps it,
	// so it never passes off old state as new.
	observedAt time.Time
	facts      wsFacts
	deleted    bool
	// consumed is a directive this workspace carried out whose
	// consumption Cluster Control has not acknowledged yet.
	consumed *ccapi.DirectiveConsumed
	// version counts changes; a send acknowledges only the version it
	// carried, so a change during the send is not lost. reportedAt is fixed
	// per version, so every retry of one version has the same bytes and the
	// same Idempotency-Key.
	version    uint64
	reportedAt time.Time
	dirty      bool
	queued     bool
}

// wsFacts are what the reporter acts on in a workspace observation: its
// milestones, the same facts by which the hand-off decides which statuses
// it may merge, so every change of them reaches the reporter.
type wsFacts struct {
	observation.Milestones
}

// classMissing reports a workspace degraded because its ClusterClass is
// missing.
func (f wsFacts) classMissing() bool { return f.DegradedReason == v1alpha1.ReasonClusterClassNotFound }

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

type claimEntry struct {
	granted  bool
	reason   string
	version  string
	lastSeen time.Time
}

func newState(lim limits, drop func(string)) *state {
	return &state{
		lim:        lim,
		drop:       drop,
		workspaces: map[string]*wsEntry{},
		directives: map[string]ccapi.Directive{},
		applied:    map[string]ccapi.Directive{},
		classes:    map[string]int32{},
		nodes:      map[string]*nodeEntry{},
		pods:       map[string]*podEntry{},
		claims:     map[string]*claimEntry{},
	}
}

func wsKey(ns, name string) string { return ns + "/" + name }

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
func (s *state) consume(k string, e *wsEntry, now time.Time) bool {
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

// observeWorkspace records a workspace's status. It reports whether a new
// report is now pending, and the Events the change calls for.
func (s *state) observeWorkspace(o *observation.WorkspaceStatus, now time.Time) (bool, []event) {
	js, err := json.Marshal(wireStatus(o))
	if err != nil {
		s.drop(dropInvalid)
		return false, nil
	}
	f := factsOf(o)
	k := wsKey(o.Namespace, o.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(o.Namespace, o.Name)
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
	changed := !bytes.Equal(e.statusJS, js)
	if changed {
		e.statusJS, e.observedAt = js, now
	}
	e.facts = f
	if o.UID != "" {
		e.uid = o.UID
	}
	if o.Class != nil {
		s.classes[o.Class.Name] = o.Class.MaxWorkspaces
	}
	events := workspaceEvents(workspaceRef(e), prev, f, o)
	if s.consume(k, e, now) {
		return true, events
	}
	if !changed {
		return false, events
	}
	s.bump(k, e, now)
	return true, events
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
	return wsFacts{o.Milestones()}
}

// deleteWorkspace records a workspace's deletion, kept as a tombstone until
// Cluster Control acknowledges it.
func (s *state) deleteWorkspace(ref *observation.WorkspaceRef, now time.Time) (bool, []event) {
	k := wsKey(ref.Namespace, ref.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.directives, k)
	delete(s.applied, k)
	e, ok := s.workspaces[k]
	if ok && e.deleted {
		return false, nil
	}
	if !ok {
		// Never seen alive by this reporter: the tombstone is all there is.
		e = &wsEntry{ns: ref.Namespace, name: ref.Name}
		s.workspaces[k] = e
	}
	if ref.UID != "" {
		e.uid = ref.UID
	}
	e.statusJS, e.deleted, e.consumed, e.observedAt = nil, true, nil, now
	s.tombstones++
	s.tombstoneGen++
	s.bump(k, e, now)
	if s.tombstones > s.lim.tombstones {
		s.evictOldestTombstone()
	}
	return true, []event{{ref: workspaceRef(e), typ: eventNormal, reason: "TeardownFinished", action: "Delete",
		note: "all children are gone; the workspace is deleted"}}
}

// evictOldestTombstone forgets the deletion Cluster Control has been told
// nothing about for longest. It only runs when an outage has outlasted
// lim.tombstones deletions. Called with the lock held.
func (s *state) evictOldestTombstone() {
	var oldest string
	for k, e := range s.workspaces {
		if e.deleted && (oldest == "" || e.observedAt.Before(s.workspaces[oldest].observedAt)) {
			oldest = k
		}
	}
	if oldest != "" {
		delete(s.workspaces, oldest)
		s.tombstones--
		s.tombstoneGen++
		s.drop(dropTombstoneLimit)
	}
}

// entry returns the workspace's entry, creating it within the limit. Called
// with the lock held.
func (s *state) entry(ns, name string) *wsEntry {
	k := wsKey(ns, name)
	if e, ok := s.workspaces[k]; ok {
		return e
	}
	if len(s.workspaces)-s.tombstones >= s.lim.workspaces {
		s.drop(dropWorkspaceLimit)
		return nil
	}
	e := &wsEntry{ns: ns, name: name}
	s.workspaces[k] = e
	return e
}

// bump makes the entry's current state a new version to report and queues
// it. Called with the lock held.
func (s *state) bump(k string, e *wsEntry, now time.Time) {
	e.version++
	e.reportedAt, e.dirty = now, true
	if !e.queued {
		e.queued = true
		s.queue = append(s.queue, k)
	}
}

// resync queues a fresh report of every live workspace that has none
// pending, so that a Cluster Control that lost its state gets it back. It
// returns how many it queued.
func (s *state) resync(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(s.workspaces)) {
		e := s.workspaces[k]
		if e.deleted || e.dirty || e.statusJS == nil {
			continue
		}
		s.bump(k, e, now)
		n++
	}
	return n
}

// idempotencyKey derives the key from the body: retries of one report share
// it, and two different reports (the body carries observedAt and
// reportedAt) never do.
func idempotencyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// pendingReport is one workspace report taken for sending.
type pendingReport struct {
	wsKey    string
	version  uint64
	consumed *ccapi.DirectiveConsumed
	body     []byte
	key      string
}

// next takes the oldest pending report and encodes it. The body is built
// from fields fixed per version, so a retry sends the same bytes.
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
		body, err := reportBody(e)
		if err != nil {
			// Only a status the encoder produced a moment ago gets here, so
			// this is unreachable; drop rather than loop on it.
			s.drop(dropInvalid)
			e.dirty = false
			continue
		}
		return pendingReport{wsKey: k, version: e.version, consumed: e.consumed, body: body, key: idempotencyKey(body)}, true
	}
	// Let the backing array go once drained, so a burst does not pin it.
	s.queue = nil
	return pendingReport{}, false
}

func reportBody(e *wsEntry) ([]byte, error) {
	rep := ccapi.WorkspaceStatusReport{
		Namespace:         e.ns,
		Name:              e.name,
		ObservedAt:        ccapi.Stamp(e.observedAt),
		ReportedAt:        ccapi.Stamp(e.reportedAt),
		Deleted:           e.deleted,
		DirectiveConsumed: e.consumed,
	}
	if !e.deleted {
		rep.Status = new(ccapi.WorkspaceStatus)
		if err := json.Unmarshal(e.statusJS, rep.Status); err != nil {
			return nil, err
		}
	}
	return json.Marshal(rep)
}

// finish records how sending p went.
func (s *state) finish(p pendingReport, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workspaces[p.wsKey]
	if !ok {
		return
	}
	if o == retry {
		// To the back of the queue: one report Cluster Control keeps failing
		// on must not hold up every other workspace.
		if e.dirty && !e.queued {
			e.queued = true
			s.queue = append(s.queue, p.wsKey)
		}
		return
	}
	// Sent, or rejected for good: either way this version is done.
	if o == sent && p.consumed != nil && e.consumed != nil && *e.consumed == *p.consumed {
		e.consumed = nil
	}
	if e.version != p.version {
		return
	}
	e.dirty = false
	if e.deleted {
		delete(s.workspaces, p.wsKey)
		s.tombstones--
		s.tombstoneGen++
	}
}

// setDirectives replaces the directives with what Cluster Control holds
// now. A directive the workspace already carried out is consumed on the
// spot, which also covers a consumption report that was lost; a directive
// that is gone is withdrawn, and what it already wrote stays. It reports
// whether any report became pending.
func (s *state) setDirectives(ds []ccapi.Directive, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.directives = make(map[string]ccapi.Directive, len(ds))
	queued := false
	for _, d := range ds {
		if d.Validate() != nil {
			continue
		}
		if len(s.directives) >= s.lim.workspaces {
			s.drop(dropDirectiveLimit)
			break
		}
		k := wsKey(d.Namespace, d.Name)
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
	for _, k := range slices.Sorted(maps.Keys(s.directives)) {
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
	k := wsKey(d.Namespace, d.Name)
	if s.directives[k] == d {
		s.applied[k] = d
	}
}

// observeClaim records a claim decision and returns the Events it calls
// for.
func (s *state) observeClaim(c *observation.ClaimDecision, now time.Time) []event {
	k := wsKey(c.Namespace, c.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.claims[k]
	events := claimEvents(c, prev, now)
	if !ok {
		if len(s.claims) >= s.lim.claims {
			s.drop(dropClaimLimit)
			return events
		}
		prev = &claimEntry{}
		s.claims[k] = prev
	}
	prev.granted, prev.reason, prev.version, prev.lastSeen = c.Granted, c.Reason, c.CredentialsVersion, now
	return events
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
	for k, c := range s.claims {
		if now.Sub(c.lastSeen) > s.lim.claimStale {
			delete(s.claims, k)
		}
	}
	rep.ClusterClasses = s.classUsage()
	return rep
}

// classUsage counts the live workspaces per ClusterClass, for the classes
// whose limit the reporter has seen, and forgets classes no workspace uses
// any more. Called with the lock held.
func (s *state) classUsage() []ccapi.ClassUsage {
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

// counts reports the sizes of the state, for metrics and tests.
type counts struct {
	Workspaces, Tombstones, Pending, Queue, Directives, Nodes, Pods, Claims int
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
		if strings.HasPrefix(k, v1alpha1.NodeLabelPrefix) {
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
	return fmt.Sprintf("workspaces=%d tombstones=%d pending=%d queue=%d directives=%d nodes=%d pods=%d claims=%d",
		c.Workspaces, c.Tombstones, c.Pending, c.Queue, c.Directives, c.Nodes, c.Pods, c.Claims)
}
