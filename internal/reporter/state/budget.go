package state

import (
	"fmt"
	"math"
	"strconv"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// The directive budget: the reporter will not be the instrument of a
// fleet-wide outage, whoever controls Cluster Control or the path to it.
// A restart rolls a workspace's pods and an idle takes them down, so each
// has a budget: at most a share of the workspaces the reporter has seen in
// the middle of one at once (at least one workspace), and a least
// interval between two on one workspace. A directive past its budget
// waits, counted and announced; it is not lost: Cluster Control holds it
// until it is consumed, and each poll tries again, oldest waiting first,
// so it is written as the budget frees. A newer directive for a workspace
// replaces its waiting one and keeps its place in the line. Wakes bring
// pods back and have no budget.
//
// What "in the middle of one" means is what the reporter's watch of the
// Workspaces shows (watch.go; the hook server's observations until it has
// listed them), and what it wrote itself:
//   - a restart, from the write (or from when a new
//     formspec.dev/artifact-binary-hash was seen, whoever wrote it) until the pods
//     run that hash, status.artifactHash, the rule that consumes a
//     restart. A rollout that does not complete (a binary that crashes, a
//     Degraded workspace) keeps its place, as a Deployment's failed pods
//     count against its maxUnavailable: a bad binary stops a fleet
//     rollout at the budget;
//   - an idle, from the write until the workspace has scaled to zero
//     (phase Idle), or, in a class that cannot scale to zero, until the
//     annotation is seen, which then takes nothing down.
//
// A write the watch has not shown yet counts for at most the budget's
// MinInterval: once it shows the annotation, it decides from then.

// Budget paces one kind of directive that takes a workspace's pods down.
type Budget struct {
	// Share is the most of the workspaces the reporter has seen that may
	// be in the middle of one at once, from 0 to 1; at least one
	// workspace always may.
	Share float64
	// MinInterval is the least time between the starts of two on one
	// workspace.
	MinInterval time.Duration
}

// limit is how many of n workspaces may be in the middle of one at once.
// The epsilon keeps a share such as 0.29 of 100 from flooring to 28.
func (b Budget) limit(n int) int {
	return max(1, int(math.Floor(b.Share*float64(n)+1e-9)))
}

// validate reports a budget that is not one.
func (b Budget) Validate(name string) error {
	if !(b.Share > 0 && b.Share <= 1) {
		return fmt.Errorf("%s share %v: want more than 0 and at most 1", name, b.Share)
	}
	if b.MinInterval <= 0 {
		return fmt.Errorf("%s least interval %v: want more than 0", name, b.MinInterval)
	}
	return nil
}

// Reasons a directive waits, the values of the reason label of
// formspec_reporter_directives_deferred_total.
const (
	// WaitBudget: the share of workspaces in the middle of a restart (or
	// an idle) is used up.
	WaitBudget = "budget"
	// WaitInterval: the workspace began a restart (or an idle) less than
	// the least interval ago.
	WaitInterval = "interval"
)

// pace is what the budget knows of one workspace.
type pace struct {
	// restartAt and idleAt are when the workspace last began a restart or
	// an idle, as far as this reporter knows: when it wrote one, or first
	// saw the annotation of one it did not write.
	restartAt, idleAt time.Time
	// restartTo is the hash of a restart this reporter wrote that no
	// observation has shown yet, and restartFrom the hash the workspace
	// asked for before it; idleUnseen likewise for an idle.
	restartTo, restartFrom string
	idleUnseen             bool
}

// observe learns from an observation (prev: the facts before it, nil for a
// workspace new to this reporter) when a restart or an idle began, and
// whether the ones this reporter wrote have been seen. A workspace first
// seen in the middle of one began it when it was seen, which may be late,
// never early.
func (p *pace) observe(prev *wsFacts, f wsFacts, at time.Time) {
	switch {
	case p.restartTo != "" && f.WantedArtifactHash == p.restartTo:
		// This reporter's own write, which began when it was written.
		p.restartTo = ""
	case prev == nil && f.WantedArtifactHash != "" && f.WantedArtifactHash != f.ArtifactHash,
		prev != nil && f.WantedArtifactHash != "" && f.WantedArtifactHash != prev.WantedArtifactHash:
		p.restartAt = latest(p.restartAt, at)
	}
	if p.restartTo != "" && f.WantedArtifactHash != p.restartFrom {
		// Someone else's hash has replaced the one written.
		p.restartTo = ""
	}
	switch {
	case p.idleUnseen && f.Idle:
		p.idleUnseen = false
	case prev == nil && f.idling(), prev != nil && f.Idle && !prev.Idle:
		p.idleAt = latest(p.idleAt, at)
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// idling reports whether the workspace is going down because of its idle
// annotation: annotated, in a class that scales to zero, and not yet Idle
// (Degraded and Pending hide whether it is, and are not ours to wait for).
func (f wsFacts) idling() bool {
	return f.Idle && f.scaleToZero && (f.Phase == v1alpha1.PhaseReady || f.Phase == v1alpha1.PhaseProgressing)
}

// restarting reports whether a workspace, with its facts and its pace,
// is in the middle of a restart.
func restarting(f wsFacts, p *pace, b Budget, now time.Time) bool {
	if f.Terminating {
		return false
	}
	return p.restartTo != "" && now.Sub(p.restartAt) < b.MinInterval ||
		f.WantedArtifactHash != "" && f.WantedArtifactHash != f.ArtifactHash
}

// goingIdle reports whether a workspace is in the middle of an idle.
func goingIdle(f wsFacts, p *pace, b Budget, now time.Time) bool {
	if f.Terminating {
		return false
	}
	return p.idleUnseen && now.Sub(p.idleAt) < b.MinInterval || f.idling()
}

// budgetUse is how much of each budget one poll has used, as it admits
// directives.
type budgetUse struct {
	fleet               int
	restarts, idles     int
	restartCap, idleCap int
}

// view is what the budget reads of one workspace: its facts and its pace,
// from the watch once it has listed every Workspace (watch.go), else from
// the hook server's observations. Called with the lock held.
func (s *State) view(k types.NamespacedName) (wsFacts, *pace, bool) {
	if s.watchSynced {
		w, ok := s.watched[k]
		if !ok {
			return wsFacts{}, nil, false
		}
		f := w.facts
		f.scaleToZero = s.classZero[f.Class]
		return f, &w.pace, true
	}
	e, ok := s.workspaces[k]
	if !ok || !e.live() {
		return wsFacts{}, nil, false
	}
	return e.facts, &e.pace, true
}

// use counts the workspaces in the middle of a restart or an idle, and
// each budget's cap. Called with the lock held.
func (s *State) use(now time.Time) budgetUse {
	var u budgetUse
	count := func(k types.NamespacedName) {
		f, p, ok := s.view(k)
		if !ok {
			return
		}
		u.fleet++
		if restarting(f, p, s.lim.Restart, now) {
			u.restarts++
		}
		if goingIdle(f, p, s.lim.Idle, now) {
			u.idles++
		}
	}
	if s.watchSynced {
		for k := range s.watched {
			count(k)
		}
	} else {
		for k := range s.workspaces {
			count(k)
		}
	}
	u.restartCap, u.idleCap = s.lim.Restart.limit(u.fleet), s.lim.Idle.limit(u.fleet)
	return u
}

// admit decides whether d may be written now onto the Workspace of f and
// p, and takes its place in the budget if so; otherwise it returns why it
// waits. Called with the lock held.
func (s *State) admit(f wsFacts, p *pace, d ccapi.Directive, u *budgetUse, now time.Time) string {
	switch d.Action {
	case ccapi.ActionRestartRequired:
		return admitTo(s.lim.Restart, p.restartAt, restarting(f, p, s.lim.Restart, now), &u.restarts, u.restartCap, now)
	case ccapi.ActionIdle:
		return admitTo(s.lim.Idle, p.idleAt, goingIdle(f, p, s.lim.Idle, now), &u.idles, u.idleCap, now)
	}
	return ""
}

// admitTo is admit for one budget: the workspace began its last one at
// last and is in the middle of one or not, used of limit places are
// taken. A workspace in the middle of one takes no new place: the new
// Directive replaces what it is doing.
func admitTo(b Budget, last time.Time, inMiddle bool, used *int, limit int, now time.Time) string {
	switch {
	case !last.IsZero() && now.Sub(last) < b.MinInterval:
		return WaitInterval
	case inMiddle:
	case *used >= limit:
		return WaitBudget
	default:
		*used++
	}
	return ""
}

// began records in p that this reporter wrote d at now onto a workspace
// whose annotation asked for wanted.
func (p *pace) began(d ccapi.Directive, wanted string, now time.Time) {
	switch d.Action {
	case ccapi.ActionRestartRequired:
		p.restartAt, p.restartTo, p.restartFrom = now, d.ArtifactHash, wanted
	case ccapi.ActionIdle:
		p.idleAt, p.idleUnseen = now, true
	}
}

// waiter is a directive waiting for its budget.
type waiter struct {
	Directive ccapi.Directive
	// since is when the workspace's first waiting directive began to
	// wait; a newer one keeps it, and its place in the line.
	since time.Time
	// Reason is WaitBudget or WaitInterval.
	Reason string
	// told is set once this directive's wait has been counted and
	// announced.
	told bool
}

// Deferral is a directive that began to wait, for its count and its
// Event.
type Deferral struct {
	waiter
	Event Event
}

// deferNote says on the workspace's Event why a directive waits and when
// it will be written.
func deferNote(d ccapi.Directive, reason string, u budgetUse, lim Limits) string {
	what, flag, b, used, limit := "restart onto "+d.ArtifactHash, "restart", lim.Restart, u.restarts, u.restartCap
	if d.Action == ccapi.ActionIdle {
		what, flag, b, used, limit = "idle", "idle", lim.Idle, u.idles, u.idleCap
	}
	if reason == WaitInterval {
		return fmt.Sprintf("Cluster Control's %s waits: the workspace began one less than %v ago, the least interval between two (--%s-min-interval); it is written once that has passed",
			what, b.MinInterval, flag)
	}
	return fmt.Sprintf("Cluster Control's %s waits: %d workspaces are in the middle of one and the budget allows %d at once (%s%% of the %d workspaces, at least one; --%s-budget-share); it is written as one finishes",
		what, used, limit, strconv.FormatFloat(b.Share*100, 'f', -1, 64), u.fleet, flag)
}
