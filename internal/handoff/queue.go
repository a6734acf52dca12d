package handoff

import (
	"slices"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"k8s.io/apimachinery/pkg/types"
)

// queued is one encoded observation.
type queued struct {
	seq uint64
	raw []byte
	// key names the object a state observation is about; it is zero for a
	// deletion, which is never replaced.
	key objKey
	// workspace names the workspace of a status or deletion, to keep a
	// status from being merged across a deletion.
	workspace types.NamespacedName
	// milestones are a workspace status's; a status replaces only one with
	// the same, so that the reporter sees every transition it announces.
	milestones observation.Milestones
	// changed is a workspace status's StatusChanged: the reporter must see
	// it, so a status that did not change the API's never replaces it.
	changed bool
	// urgent marks what Run posts without lingering: a deletion, which no
	// later sync repeats, or a claim decision that changed (granted,
	// denied, rotated), which the reporter announces.
	urgent bool
}

// deletion reports whether q is a workspace deletion.
func (q *queued) deletion() bool {
	return q.key == objKey{} && q.workspace != types.NamespacedName{}
}

// objKind is the kind of object a state observation is about.
type objKind uint8

const (
	kindWorkspace objKind = iota + 1
	kindNode
	kindPod
)

// objKey identifies the object of a state observation: its kind and UID
// when the observation carries one, else its kind and namespace/name (a
// Node by name alone). Statuses of a workspace recreated under the same
// name have a new UID, so they are a different object.
type objKey struct {
	kind objKind
	uid  types.UID
	name types.NamespacedName
}

func nameKey(kind objKind, uid types.UID, name types.NamespacedName) objKey {
	if uid != "" {
		return objKey{kind: kind, uid: uid}
	}
	return objKey{kind: kind, name: name}
}

// newQueued describes an encoded observation for the queue; seq is set
// when it is queued.
func newQueued(obs observation.Observation, raw []byte) queued {
	q := queued{raw: raw}
	switch {
	case obs.WorkspaceDeleted != nil:
		q.workspace = types.NamespacedName{Namespace: obs.WorkspaceDeleted.Namespace, Name: obs.WorkspaceDeleted.Name}
	case obs.Workspace != nil:
		q.workspace = types.NamespacedName{Namespace: obs.Workspace.Namespace, Name: obs.Workspace.Name}
		q.key = nameKey(kindWorkspace, obs.Workspace.UID, q.workspace)
		q.milestones = obs.Workspace.Milestones()
		q.changed = obs.Workspace.StatusChanged
	case obs.Node != nil:
		q.key = objKey{kind: kindNode, name: types.NamespacedName{Name: obs.Node.Name}}
	case obs.Pod != nil:
		q.key = nameKey(kindPod, "", types.NamespacedName{Namespace: obs.Pod.Namespace, Name: obs.Pod.Name})
	}
	// A repeated claim decision (a resync's) waits with the states: the
	// reporter has nothing to announce for it, and the next resync repeats
	// it again. A claim decision is never replaced: each one that changed
	// is one the reporter records as an Event (granted, denied, rotated),
	// and a denial must not vanish because a grant followed it quickly.
	q.urgent = obs.WorkspaceDeleted != nil || obs.Claim != nil && !obs.Claim.Repeat
	return q
}

// Send queues obs for the sidecar and returns at once, dropping what it
// must to stay within QueueSize and QueueBytes. It encodes obs on the
// caller's goroutine (a hook's), so it writes what the hooks' codec would
// with the short path of encode.go, not encoding/json's.
//
// A state (a workspace status, a node, a pod placement) replaces the
// queued observation of the same object that is not yet being posted, in
// its place, since the sidecar keeps only the latest state per object
// anyway; it is appended instead when that one is being posted, when a
// deletion of the same workspace was queued after it, or when the two
// statuses have different milestones (a transition the reporter
// announces must reach it), and when the queued one changed the API's
// status and the new one did not (observation.WorkspaceStatus's
// StatusChanged). A deletion or a claim decision is always appended.
//
// A nil *Client discards, so a hook server without a sidecar can pass its
// nil client as the hooks' Sink.
func (c *Client) Send(obs observation.Observation) {
	if c == nil {
		return
	}
	raw, err := encode(obs)
	if err != nil || len(raw) > c.opts.BatchBytes {
		// Nothing the sidecar could take: count it rather than let it
		// block the queue.
		c.dropped.Add(1)
		return
	}
	q := newQueued(obs, raw)
	c.mu.Lock()
	first := len(c.queue) == 0
	if !c.replace(q) {
		c.push(q)
	}
	for len(c.queue) > c.opts.QueueSize || c.bytes > c.opts.QueueBytes {
		c.evict()
	}
	// Run waits for the first observation of an empty queue, and then,
	// lingering, for one that makes it ready: only those wake it. Waking
	// it for every sync in between would cost each one a goroutine switch
	// (often a thread's wake-up too) for a check that finds nothing to do.
	nudge := first || c.readyLocked()
	c.mu.Unlock()
	if nudge {
		select {
		case c.waiting <- struct{}{}:
		default:
		}
	}
}

// replace puts q's bytes in the place of the queued observation of the
// same object, if there is one that may be replaced, and reports whether
// it did. Called with the lock held.
func (c *Client) replace(q queued) bool {
	if q.key == (objKey{}) {
		return false
	}
	seq, ok := c.latest[q.key]
	if !ok || seq <= c.posting || (q.workspace != types.NamespacedName{} && c.deleted[q.workspace] > seq) {
		return false
	}
	i, found := c.index(seq)
	if !found || c.queue[i].milestones != q.milestones || c.queue[i].changed && !q.changed {
		return false
	}
	c.bytes += len(q.raw) - len(c.queue[i].raw)
	c.queue[i].raw, c.queue[i].changed = q.raw, q.changed
	c.coalesced.Add(1)
	return true
}

// push appends q to the queue and indexes it. Called with the lock held.
func (c *Client) push(q queued) {
	c.seq++
	q.seq = c.seq
	c.queue = append(c.queue, q)
	c.bytes += len(q.raw)
	if q.urgent {
		c.urgent++
	}
	switch {
	case q.deletion():
		c.deleted[q.workspace] = q.seq
	case q.key != objKey{}:
		c.latest[q.key] = q.seq
	}
}

// index finds the observation with seq by binary search: the queue is in
// seq order, and replacing keeps the older seq. Called with the lock held.
func (c *Client) index(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(c.queue, seq, func(q queued, seq uint64) int {
		switch {
		case q.seq < seq:
			return -1
		case q.seq > seq:
			return 1
		}
		return 0
	})
}

// forget removes the queued observation at i from the indexes, when they
// still point at it, and clears its slot so its bytes can be collected.
// Called with the lock held.
func (c *Client) forget(i int) {
	q := &c.queue[i]
	c.bytes -= len(q.raw)
	if q.urgent {
		c.urgent--
	}
	switch {
	case q.deletion():
		if c.deleted[q.workspace] == q.seq {
			delete(c.deleted, q.workspace)
		}
	case q.key != objKey{}:
		if c.latest[q.key] == q.seq {
			delete(c.latest, q.key)
		}
	}
	*q = queued{}
}

// evict drops the oldest observation that is not a deletion, or the oldest
// deletion when nothing else is left. Dropping the head only reslices the
// queue; dropping from behind leading deletions shifts the observations
// before it, which is O(n) but happens only while deletions pile up at the
// head of a full queue. Called with the lock held.
func (c *Client) evict() {
	i := slices.IndexFunc(c.queue, func(q queued) bool { return !q.deletion() })
	if i < 0 {
		i = 0
	}
	c.forget(i)
	if i == 0 {
		c.queue = c.queue[1:]
	} else {
		copy(c.queue[1:i+1], c.queue[:i])
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
	}
	c.dropped.Add(1)
}

// Dropped returns how many observations have been dropped so far.
func (c *Client) Dropped() uint64 {
	return c.dropped.Load()
}

// Coalesced returns how many observations have replaced a queued one of
// the same object so far.
func (c *Client) Coalesced() uint64 {
	return c.coalesced.Load()
}

// Pending returns how many observations wait to be posted.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// PendingBytes returns the encoded size of the observations waiting.
func (c *Client) PendingBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// ready reports whether Run should post without lingering: the queue holds
// a whole batch, a deletion, or a claim decision that changed.
func (c *Client) ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyLocked()
}

// readyLocked is ready, called with the lock held.
func (c *Client) readyLocked() bool {
	return len(c.queue) >= c.opts.BatchSize || c.bytes >= c.opts.BatchBytes || c.urgent > 0
}

// peek returns up to BatchSize observations, within BatchBytes, from the
// head of the queue, leaving them there until they are acknowledged, and
// marks them as being posted: from now until done, a newer state of one
// of their objects is appended, not put in their place, or the ack would
// drop it unposted.
func (c *Client) peek() []queued {
	c.mu.Lock()
	defer c.mu.Unlock()
	size := 0
	n := 0
	for n < len(c.queue) && n < c.opts.BatchSize && size+len(c.queue[n].raw) <= c.opts.BatchBytes {
		size += len(c.queue[n].raw)
		n++
	}
	if n > 0 {
		c.posting = c.queue[n-1].seq
	}
	return append([]queued(nil), c.queue[:n]...)
}

// done ends the posting of the last peeked batch: what of it is still
// queued (the sidecar did not take it) may be replaced again.
func (c *Client) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posting = 0
}

// ack removes the observations up to seq from the head of the queue: the
// sidecar has them (or refused them for good). Those evicted meanwhile are
// already gone.
func (c *Client) ack(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(c.queue) && c.queue[n].seq <= seq {
		c.forget(n)
		n++
	}
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		// Let the backing array go once drained, so a burst does not pin it.
		c.queue = nil
	}
}
