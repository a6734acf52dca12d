package clustercontrol

import (
	"encoding/json"
	"time"
)

// What the server keeps, and its bound.
//
// The server keeps what it accepted, for its admin API and for tests to
// read: the reports in arrival order (node health, workspace status), each
// workspace's newest state, the idempotency keys, the consumptions and
// scalings reported, and a record of every request. A report is kept as
// the bytes it arrived in and decoded when read, so that what is charged
// is what is held: a decoded report takes two to four times its JSON.
// Everything but the state is history; past Options.MaxBytes the oldest
// history goes first, whichever list it is in, then the workspace state
// updated longest ago (a reporter sends it again within its resync).
// Directives are not charged: only the admin API, behind its token, sets
// them, one per workspace.

// recordOverhead is what a kept record costs beyond the bytes of its
// strings and bodies: its slot in a slice or map, the string and slice
// headers, a time.
const recordOverhead = 128

// kept is one record with what it is charged and its place in the order
// of arrival.
type kept[T any] struct {
	seq  uint64
	size int64
	v    T
}

// history is a list of records in arrival order, oldest first.
type history[T any] struct {
	items []kept[T]
	// dropped is called with each record evicted (the idempotency keys'
	// map entry goes with its record).
	dropped func(T)
}

func (h *history[T]) values() []T {
	out := make([]T, len(h.items))
	for i, k := range h.items {
		out[i] = k.v
	}
	return out
}

func (h *history[T]) oldest() (uint64, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].seq, true
}

func (h *history[T]) dropOldest() int64 {
	k := h.items[0]
	// Clear the slot, so that the backing array does not keep the record.
	h.items[0] = kept[T]{}
	h.items = h.items[1:]
	if h.dropped != nil {
		h.dropped(k.v)
	}
	return k.size
}

// evictable is a history of any type, for the eviction that compares them.
type evictable interface {
	oldest() (uint64, bool)
	dropOldest() int64
}

// nodeRecord is a node-health report as kept: the body, and what
// ClassUsage needs to find each reporter's latest without decoding them
// all.
type nodeRecord struct {
	reporter string
	sentAt   time.Time
	body     []byte
}

// wsState is a workspace's newest state as kept.
type wsState struct {
	seq        uint64
	size       int64
	observedAt time.Time
	body       []byte
}

// store is everything the server keeps, within max bytes. Its methods are
// called with Server.mu held.
type store struct {
	max, used int64
	seq       uint64

	nodeReports history[nodeRecord]
	wsReports   history[[]byte]
	workspaces  map[string]wsState
	consumed    history[Consumption]
	autoScales  history[AutoScale]
	requests    history[Request]
	idem        map[string]idemEntry
	idemOrder   history[string]

	histories []evictable
}

func newStore(max int64) *store {
	s := &store{max: max, workspaces: map[string]wsState{}, idem: map[string]idemEntry{}}
	s.idemOrder.dropped = func(key string) { delete(s.idem, key) }
	s.histories = []evictable{&s.nodeReports, &s.wsReports, &s.consumed, &s.autoScales, &s.requests, &s.idemOrder}
	return s
}

// fits reports whether a record of size bytes can be kept at all.
func (s *store) fits(size int64) bool { return size <= s.max }

// add appends v to h, charged size bytes, then keeps within the bounds.
func add[T any](s *store, h *history[T], v T, size int64) {
	s.seq++
	h.items = append(h.items, kept[T]{seq: s.seq, size: size, v: v})
	s.used += size
	// The count bounds what a read of the list copies.
	if len(h.items) > historyLimit {
		s.used -= h.dropOldest()
	}
	s.evict()
}

// setWorkspace makes body the state of workspace k.
func (s *store) setWorkspace(k string, observedAt time.Time, body []byte) {
	s.seq++
	size := recordOverhead + int64(len(k)+len(body))
	s.used += size - s.workspaces[k].size
	s.workspaces[k] = wsState{seq: s.seq, size: size, observedAt: observedAt, body: body}
	s.evict()
}

// evict drops the oldest history, then the stalest workspace state, until
// the store is within its budget.
func (s *store) evict() {
	for s.used > s.max {
		var oldest evictable
		var seq uint64
		for _, h := range s.histories {
			if q, ok := h.oldest(); ok && (oldest == nil || q < seq) {
				oldest, seq = h, q
			}
		}
		if oldest != nil {
			s.used -= oldest.dropOldest()
			continue
		}
		stalest, found := "", false
		for k, w := range s.workspaces {
			if !found || w.seq < s.workspaces[stalest].seq {
				stalest, found = k, true
			}
		}
		if !found {
			return
		}
		s.used -= s.workspaces[stalest].size
		delete(s.workspaces, stalest)
	}
}

// decoded decodes a kept body, which was decoded once already, when it
// was accepted.
func decoded[T any](body []byte) T {
	var v T
	_ = json.Unmarshal(body, &v)
	return v
}

// decodeAll decodes kept bodies.
func decodeAll[T any](bodies [][]byte) []T {
	out := make([]T, 0, len(bodies))
	for _, b := range bodies {
		out = append(out, decoded[T](b))
	}
	return out
}

// nodeBodies are the kept node-health reports' bodies, oldest first.
func (s *store) nodeBodies() [][]byte {
	out := make([][]byte, 0, len(s.nodeReports.items))
	for _, k := range s.nodeReports.items {
		out = append(out, k.v.body)
	}
	return out
}

// latestPerReporter is the body of each reporter's latest node-health
// report, by SentAt.
func (s *store) latestPerReporter() [][]byte {
	latest := map[string]nodeRecord{}
	for _, k := range s.nodeReports.items {
		if cur, ok := latest[k.v.reporter]; !ok || !k.v.sentAt.Before(cur.sentAt) {
			latest[k.v.reporter] = k.v
		}
	}
	out := make([][]byte, 0, len(latest))
	for _, r := range latest {
		out = append(out, r.body)
	}
	return out
}

// workspaceBodies are the kept workspace states' bodies by key.
func (s *store) workspaceBodies() map[string][]byte {
	out := make(map[string][]byte, len(s.workspaces))
	for k, w := range s.workspaces {
		out[k] = w.body
	}
	return out
}

// lastNodeBody is the newest node-health report's body, or nil.
func (s *store) lastNodeBody() []byte {
	if n := len(s.nodeReports.items); n > 0 {
		return s.nodeReports.items[n-1].v.body
	}
	return nil
}
