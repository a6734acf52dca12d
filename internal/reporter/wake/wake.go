package wake

import (
	"maps"
	"slices"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"k8s.io/apimachinery/pkg/types"
)

// Wake on request: the interceptor holds requests for a workspace of a
// wake-on-request class while it has no ready pod; the reporter polls the
// interceptors' queues and decides here what to do about each such
// workspace. This file decides, without I/O; loop.go polls and writes.
//
//   - A held request for an idle workspace wakes it (formspec.dev/idle is
//     removed), unless Cluster Control has an idle directive for it: its
//     directives win.
//   - The cap is level-triggered, the same for every reporter whoever woke
//     the workspace: while it has no ready pod and holds the class's
//     maxHeldRequests, it should carry formspec.dev/wake-overflow, and the
//     interceptor answers further requests with 503; once it has a ready
//     pod, or holds at most half the cap, it should not. A reporter writes
//     the annotation when the workspace's last observation differs, again
//     after wakeRetry if the observation still does, so that one left
//     behind by a reporter that died is taken away by the others.
//   - The wake ends at the first complete poll at which at most half of the
//     peak of held requests are still held (they are all let go together
//     when a pod turns ready, and a client or two giving up must not end
//     it early). Its cold start, from the poll that first saw a held
//     request to that one, is observed unless the class's wake timeout has
//     passed, in which case the interceptor answered them 504 and the wake
//     timed out. Requests the interceptor has forwarded stay counted until
//     their answers end (a slow handler, a stream), so a wake still held
//     wakeRetry past its timeout ends too: answered when a pod had turned
//     ready, its cold start then up to when the reporter saw it ready.
//   - A partial poll, where some interceptor did not answer, can start a
//     wake but ends none and moves no cap: what it lacks is not a request
//     let go.
//   - A workspace the interceptors list a route for, and have seen no
//     request for during the class's idleAfterSeconds, is idled, unless
//     Cluster Control has any directive for it, and only when every
//     interceptor answered every poll of that time: one that cannot be
//     asked might be serving it. A workspace whose route no interceptor
//     lists could not be woken, and is never idled.
//   - A write that fails is tried again after wakeRetry, not at every poll.

// wakeRetry is how long a failed write waits before it is tried again, and
// how long a wake may stay counted past its timeout.
const wakeRetry = 10 * time.Second

// Action is one thing the wake loop has to do.
type Action int

const (
	Wake Action = iota
	Idle
	OverflowOn
	OverflowOff
	ColdStart
	WakeTimeout
)

// Step is one action for one workspace.
type Step struct {
	Action Action
	Name   types.NamespacedName
	UID    types.UID
	// Held is the requests held when the step was decided.
	Held int
	// Took is the cold start, for ColdStart and WakeTimeout.
	Took time.Duration
}

// wakeEntry is what the reporter knows of one wake-on-request workspace.
type wakeEntry struct {
	info        observation.WakeInfo
	uid         types.UID
	idle        bool
	terminating bool
	// ready is the pods the last observation counted ready; overflowSeen
	// whether it carried formspec.dev/wake-overflow.
	ready        int32
	overflowSeen bool

	// count is the route's summed RequestCount at the last complete poll;
	// a change, or a held request, is activity. countKnown is set once a
	// complete poll listed the route.
	count        int64
	countKnown   bool
	lastActivity time.Time
	// idledAt is when this reporter idled the workspace, so that it does
	// not do it again before the hook shows it idle.
	idledAt time.Time
	// retryAt holds back a wake or an idle after a failed write.
	retryAt time.Time

	// overflowWant is the cap's state at the last complete poll;
	// overflowWrote is the value this reporter last wrote, at overflowAt.
	overflowWant  bool
	overflowWrote bool
	overflowAt    time.Time

	// A wake this reporter started: when the first held request was seen,
	// the most held since, and when a pod was first seen ready.
	wakeAt  time.Time
	peak    int
	readyAt time.Time
}

// Waker holds the wake-on-request workspaces, bounded like the state's
// workspaces.
type Waker struct {
	limit int
	drop  func(reason string)

	mu      sync.Mutex
	entries map[types.NamespacedName]*wakeEntry
	// lastIncomplete is the last poll at which some interceptor did not
	// answer.
	lastIncomplete time.Time
}

func NewWaker(limit int, start time.Time, drop func(string)) *Waker {
	// Until a complete poll, nothing may be idled.
	return &Waker{limit: limit, drop: drop, entries: map[types.NamespacedName]*wakeEntry{}, lastIncomplete: start}
}

// Observe records a workspace observation: a wake-on-request workspace is
// tracked, any other forgotten.
func (w *Waker) Observe(o *observation.WorkspaceStatus, now time.Time) {
	k := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if o.Class == nil || o.Class.Wake == nil {
		delete(w.entries, k)
		return
	}
	e, ok := w.entries[k]
	if !ok {
		if len(w.entries) >= w.limit {
			w.drop(state.DropWorkspaceLimit)
			return
		}
		// The reporter has not watched it before: its inactivity counts
		// from now.
		e = &wakeEntry{lastActivity: now}
		w.entries[k] = e
	}
	e.info, e.uid, e.terminating = *o.Class.Wake, o.UID, o.Terminating
	e.ready, e.overflowSeen = o.ReadyReplicas, o.WakeOverflow
	if !e.wakeAt.IsZero() && e.readyAt.IsZero() && o.ReadyReplicas > 0 {
		e.readyAt = now
	}
	if o.Idle != e.idle {
		e.idle = o.Idle
		if !o.Idle {
			e.idledAt = time.Time{}
		}
	}
}

// Forget drops a deleted workspace.
func (w *Waker) Forget(k types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, k)
}

// routeKey is the interceptor's queue key of a workspace's route.
func routeKey(k types.NamespacedName) string { return k.Namespace + "/" + k.Name }

// DirectiveOf says which directive Cluster Control holds for a workspace
// ("" for none).
type DirectiveOf func(types.NamespacedName) string

// Decide turns one poll into steps, in workspace order. The steps it
// returns are already reflected in the entries: a wake is under way, an
// idle sent; done corrects them with what the API server said.
func (w *Waker) Decide(snap Snapshot, now time.Time, directive DirectiveOf) []Step {
	w.mu.Lock()
	defer w.mu.Unlock()
	complete := snap.Complete()
	if !complete {
		w.lastIncomplete = now
	}
	var steps []Step
	for _, k := range slices.SortedFunc(maps.Keys(w.entries), state.CompareNames) {
		e := w.entries[k]
		c, listed := snap.routes[routeKey(k)]
		if c.Concurrency > 0 || (listed && complete && e.countKnown && c.RequestCount != e.count) {
			e.lastActivity = now
		}
		if listed && complete {
			e.count, e.countKnown = c.RequestCount, true
		}
		step := func(a Action) Step { return Step{Action: a, Name: k, UID: e.uid, Held: c.Concurrency} }
		if e.terminating {
			e.wakeAt = time.Time{}
			continue
		}
		if e.wakeAt.IsZero() && !now.Before(e.retryAt) {
			if c.Concurrency > 0 && e.idle && directive(k) != ccapi.ActionIdle {
				e.wakeAt, e.peak, e.readyAt = now, c.Concurrency, time.Time{}
				steps = append(steps, step(Wake))
			} else if w.idleDue(e, now, complete) && directive(k) == "" {
				e.idledAt = now
				steps = append(steps, step(Idle))
			}
		}
		if !complete {
			continue
		}
		if s, ok := w.overflow(e, c.Concurrency, now); ok {
			steps = append(steps, step(s))
		}
		if e.wakeAt.IsZero() {
			continue
		}
		e.peak = max(e.peak, c.Concurrency)
		took := now.Sub(e.wakeAt)
		timeout := time.Duration(e.info.TimeoutSeconds) * time.Second
		s := step(ColdStart)
		switch {
		case c.Concurrency <= e.peak/2:
			if took >= timeout {
				s.Action = WakeTimeout
			}
		case took >= timeout+wakeRetry && !e.readyAt.IsZero():
			// Still counted long after the timeout, with a pod ready:
			// what the interceptor counts are forwarded requests whose
			// answers have not ended.
			took = e.readyAt.Sub(e.wakeAt)
		case took >= timeout+wakeRetry:
			s.Action = WakeTimeout
		default:
			continue
		}
		s.Took = took
		steps = append(steps, s)
		e.wakeAt, e.peak, e.readyAt = time.Time{}, 0, time.Time{}
	}
	return steps
}

// overflow decides the cap for one workspace at a complete poll: the step
// that writes formspec.dev/wake-overflow, if its last observation is not
// what the cap wants and this reporter has not just written that.
func (w *Waker) overflow(e *wakeEntry, held int, now time.Time) (Action, bool) {
	limit := int(e.info.MaxHeldRequests)
	switch {
	case e.ready > 0 || held <= limit/2:
		e.overflowWant = false
	case held >= limit:
		e.overflowWant = true
	}
	if e.overflowWant == e.overflowSeen || (e.overflowWant == e.overflowWrote && now.Sub(e.overflowAt) < wakeRetry) {
		return 0, false
	}
	e.overflowAt, e.overflowWrote = now, e.overflowWant
	if e.overflowWant {
		return OverflowOn, true
	}
	return OverflowOff, true
}

// idleDue reports whether a workspace has gone without a request for its
// class's idleAfterSeconds, as every interceptor could tell all along.
func (w *Waker) idleDue(e *wakeEntry, now time.Time, complete bool) bool {
	after := time.Duration(e.info.IdleAfterSeconds) * time.Second
	return after > 0 && complete && e.countKnown && !e.idle && e.idledAt.IsZero() &&
		now.Sub(e.lastActivity) >= after && now.Sub(w.lastIncomplete) >= after
}

// WokenElsewhere records that a wake found the workspace no longer idle
// (another reporter, Cluster Control or a person woke it first): this
// reporter does not follow that wake.
func (w *Waker) WokenElsewhere(k types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[k]; ok {
		e.idle, e.wakeAt, e.peak = false, time.Time{}, 0
	}
}

// Woken records that this reporter's wake removed the annotation.
func (w *Waker) Woken(k types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[k]; ok {
		e.idle, e.idledAt = false, time.Time{}
	}
}

// Idled records that this reporter's idle set the annotation, so that a
// request held before the hook shows it idle wakes it again.
func (w *Waker) Idled(k types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[k]; ok {
		e.idle = true
	}
}

// IdleFailed undoes an idle that could not be written; it is tried again
// after wakeRetry.
func (w *Waker) IdleFailed(k types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[k]; ok {
		e.idledAt, e.retryAt = time.Time{}, now.Add(wakeRetry)
	}
}

// WakeFailed undoes a wake that could not be written: the workspace is
// still idle, and the wake is tried again after wakeRetry.
func (w *Waker) WakeFailed(k types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[k]; ok {
		e.idle, e.wakeAt, e.peak, e.retryAt = true, time.Time{}, 0, now.Add(wakeRetry)
	}
}

// Tracked is how many wake-on-request workspaces the reporter follows.
func (w *Waker) Tracked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}
