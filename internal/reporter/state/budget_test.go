package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/google/go-cmp/cmp"
)

// running is a steady workspace of the budget tests: Ready, its pods on
// the hash it asks for, in a class that scales to zero.
func running(name, hash string) *observation.WorkspaceStatus {
	return &observation.WorkspaceStatus{Namespace: "ns", Name: name, Phase: "Ready", ArtifactHash: hash, WantedArtifactHash: hash,
		Class: &observation.ClassInfo{Name: "zero", ScaleToZero: true}}
}

func restartOf(name, hash string) ccapi.Directive {
	return ccapi.Directive{Namespace: "ns", Name: name, Action: ccapi.ActionRestartRequired, ArtifactHash: hash}
}

func idleOf(name string) ccapi.Directive {
	return ccapi.Directive{Namespace: "ns", Name: name, Action: ccapi.ActionIdle}
}

func wsName(i int) string { return fmt.Sprintf("ws-%02d", i) }

// TestBudget holds the budget's rules, one poll each: how many of the
// fleet may be in the middle of a restart or an idle at once, what counts
// as in the middle of one, and the least interval per workspace.
func TestBudget(t *testing.T) {
	restart, idle := Budget{Share: 0.1, MinInterval: 10 * time.Minute}, Budget{Share: 0.1, MinInterval: 10 * time.Minute}
	cases := map[string]struct {
		reason  string
		fleet   int
		restart Budget
		// before happens at t0, to the state that has seen the fleet
		// running digest(0); the poll is at t0+at.
		before     func(st *State)
		at         time.Duration
		directives []ccapi.Directive
		wantWrite  []string
		// wantWait is each waiting workspace's reason.
		wantWait map[string]string
	}{
		"Share": {
			reason:     "a tenth of 20 workspaces: two restarts at once, the others wait, the first by name going first",
			fleet:      20,
			directives: []ccapi.Directive{restartOf("ws-03", digest(1)), restartOf("ws-01", digest(1)), restartOf("ws-02", digest(1)), restartOf("ws-04", digest(1))},
			wantWrite:  []string{"ws-01", "ws-02"},
			wantWait:   map[string]string{"ws-03": WaitBudget, "ws-04": WaitBudget},
		},
		"AtLeastOne": {
			reason:     "a tenth of five is half a workspace: one may always restart, or no directive would ever be written",
			fleet:      5,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1)), restartOf("ws-01", digest(1))},
			wantWrite:  []string{"ws-00"},
			wantWait:   map[string]string{"ws-01": WaitBudget},
		},
		"ShareRoundsDown": {
			reason:     "0.29 of 10 is 2.9: two at once, never three",
			fleet:      10,
			restart:    Budget{Share: 0.29, MinInterval: time.Minute},
			directives: []ccapi.Directive{restartOf("ws-00", digest(1)), restartOf("ws-01", digest(1)), restartOf("ws-02", digest(1))},
			wantWrite:  []string{"ws-00", "ws-01"},
			wantWait:   map[string]string{"ws-02": WaitBudget},
		},
		"RolloutsInFlightCount": {
			reason: "two workspaces roll onto a hash someone else wrote: the two places of 20 are taken",
			fleet:  20,
			before: func(st *State) {
				for _, n := range []string{"ws-10", "ws-11"} {
					o := running(n, digest(0))
					o.WantedArtifactHash, o.Phase = digest(7), "Progressing"
					st.ObserveWorkspace(o, t0)
				}
			},
			at:         11 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1))},
			wantWait:   map[string]string{"ws-00": WaitBudget},
		},
		"StuckRolloutKeepsItsPlace": {
			reason: "a rollout that never completes (a binary that crashes) holds its place an hour later: a bad binary stops the rollout at the budget",
			fleet:  10,
			before: func(st *State) {
				o := running("ws-09", digest(0))
				o.WantedArtifactHash, o.Phase = digest(7), "Degraded"
				st.ObserveWorkspace(o, t0)
			},
			at:         time.Hour,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1))},
			wantWait:   map[string]string{"ws-00": WaitBudget},
		},
		"CompletedRolloutsFree": {
			reason: "the pods run the hash: the rollout is over and frees its place",
			fleet:  10,
			before: func(st *State) {
				st.ObserveWorkspace(running("ws-09", digest(7)), t0)
			},
			at:         time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1))},
			wantWrite:  []string{"ws-00"},
		},
		"RollingWorkspaceTakesNoNewPlace": {
			reason: "a newer hash for a workspace already rolling (past its interval) replaces that rollout: no new place is taken",
			fleet:  10,
			before: func(st *State) {
				o := running("ws-00", digest(0))
				o.WantedArtifactHash, o.Phase = digest(1), "Progressing"
				st.ObserveWorkspace(o, t0)
			},
			at:         11 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(2)), restartOf("ws-01", digest(2))},
			wantWrite:  []string{"ws-00"},
			wantWait:   map[string]string{"ws-01": WaitBudget},
		},
		"MinInterval": {
			reason: "restarted by this reporter five minutes ago, rolled out since: the next waits for the least interval",
			fleet:  10,
			before: func(st *State) {
				st.Written(restartOf("ws-00", digest(1)), true, t0)
				st.ObserveWorkspace(running("ws-00", digest(1)), t0.Add(time.Minute))
			},
			at:         5 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(2))},
			wantWait:   map[string]string{"ws-00": WaitInterval},
		},
		"MinIntervalPassed": {
			reason: "ten minutes after the last restart began, the next may",
			fleet:  10,
			before: func(st *State) {
				st.Written(restartOf("ws-00", digest(1)), true, t0)
				st.ObserveWorkspace(running("ws-00", digest(1)), t0.Add(time.Minute))
			},
			at:         10 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(2))},
			wantWrite:  []string{"ws-00"},
		},
		"MinIntervalFromObservation": {
			reason: "the other replica's reporter (or a person) restarted it: the observation of the new hash starts the interval",
			fleet:  10,
			before: func(st *State) {
				o := running("ws-00", digest(0))
				o.WantedArtifactHash = digest(5)
				st.ObserveWorkspace(o, t0.Add(time.Minute))
				st.ObserveWorkspace(running("ws-00", digest(5)), t0.Add(2*time.Minute))
			},
			at:         10 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(2))},
			wantWait:   map[string]string{"ws-00": WaitInterval},
		},
		"UnseenWriteCounts": {
			reason: "a restart written a minute ago that no observation has shown yet takes its place",
			fleet:  10,
			before: func(st *State) {
				st.Written(restartOf("ws-09", digest(1)), true, t0)
			},
			at:         time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1))},
			wantWait:   map[string]string{"ws-00": WaitBudget},
		},
		"UnseenWriteExpires": {
			reason: "never seen in a whole interval (the hook server's syncs went elsewhere, or a person undid it): it no longer counts",
			fleet:  10,
			before: func(st *State) {
				st.Written(restartOf("ws-09", digest(1)), true, t0)
			},
			at:         10 * time.Minute,
			directives: []ccapi.Directive{restartOf("ws-00", digest(1))},
			wantWrite:  []string{"ws-00"},
		},
		"IdleShare": {
			reason: "idles have a budget of their own: one idle of ten at once, beside a restart",
			fleet:  10,
			directives: []ccapi.Directive{idleOf("ws-00"), idleOf("ws-01"), restartOf("ws-02", digest(1)),
				{Namespace: "ns", Name: "ws-03", Action: ccapi.ActionWake}},
			wantWrite: []string{"ws-00", "ws-02"},
			wantWait:  map[string]string{"ws-01": WaitBudget},
		},
		"ScalingDownCounts": {
			reason: "a workspace annotated idle that still has pods (Progressing) is going down",
			fleet:  10,
			before: func(st *State) {
				o := running("ws-09", digest(0))
				o.Idle, o.Phase = true, "Progressing"
				st.ObserveWorkspace(o, t0)
			},
			at:         time.Hour,
			directives: []ccapi.Directive{idleOf("ws-00")},
			wantWait:   map[string]string{"ws-00": WaitBudget},
		},
		"IdleWithoutScaleToZero": {
			reason: "annotated idle in a class that cannot scale to zero: nothing goes down, nothing is counted",
			fleet:  10,
			before: func(st *State) {
				o := running("ws-09", digest(0))
				o.Idle, o.Class = true, &observation.ClassInfo{Name: "plain"}
				st.ObserveWorkspace(o, t0)
			},
			at:         time.Minute,
			directives: []ccapi.Directive{idleOf("ws-00")},
			wantWrite:  []string{"ws-00"},
		},
		"IdleMinInterval": {
			reason: "idled four minutes ago, woken since: the next idle waits for the least interval",
			fleet:  10,
			before: func(st *State) {
				st.Written(idleOf("ws-00"), true, t0)
				o := running("ws-00", digest(0))
				o.Idle, o.Phase = true, "Idle"
				st.ObserveWorkspace(o, t0.Add(time.Minute))
				st.ObserveWorkspace(running("ws-00", digest(0)), t0.Add(3*time.Minute))
			},
			at:         4 * time.Minute,
			directives: []ccapi.Directive{idleOf("ws-00")},
			wantWait:   map[string]string{"ws-00": WaitInterval},
		},
		"WakesUnbudgeted": {
			reason: "a wake brings pods back: every one is written at once",
			fleet:  10,
			before: func(st *State) {
				for i := range 10 {
					o := running(wsName(i), digest(0))
					o.Idle, o.Phase = true, "Idle"
					st.ObserveWorkspace(o, t0)
				}
			},
			at: time.Second,
			directives: []ccapi.Directive{{Namespace: "ns", Name: "ws-00", Action: ccapi.ActionWake},
				{Namespace: "ns", Name: "ws-01", Action: ccapi.ActionWake}, {Namespace: "ns", Name: "ws-02", Action: ccapi.ActionWake}},
			wantWrite: []string{"ws-00", "ws-01", "ws-02"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rb := restart
			if tc.restart != (Budget{}) {
				rb = tc.restart
			}
			st := New(Limits{Workspaces: 100, Tombstones: 10, Restart: rb, Idle: idle}, func(string) {})
			for i := range tc.fleet {
				st.ObserveWorkspace(running(wsName(i), digest(0)), t0.Add(-time.Hour))
			}
			if tc.before != nil {
				tc.before(st)
			}
			now := t0.Add(tc.at)
			st.SetDirectives(tc.directives, now)
			plan := st.ToWrite(now)
			var wrote []string
			for _, d := range plan.Write {
				wrote = append(wrote, d.Name)
			}
			if diff := cmp.Diff(tc.wantWrite, wrote); diff != "" {
				t.Errorf("%s\nwritten (-want, +got):\n%s", tc.reason, diff)
			}
			waits := map[string]string{}
			for _, w := range plan.Deferred {
				waits[w.Directive.Name] = w.Reason
			}
			if len(waits) == 0 {
				waits = nil
			}
			if diff := cmp.Diff(tc.wantWait, waits); diff != "" {
				t.Errorf("%s\nwaiting (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWaitingDirectivesApplied follows directives past the budget through
// polls, on a fake clock: they wait, counted once and announced once
// each, and are written one by one as the rollouts before them complete,
// the one waiting longest first; a newer directive for a waiting
// workspace replaces the older and keeps its place.
func TestWaitingDirectivesApplied(t *testing.T) {
	st := New(Limits{Workspaces: 100, Tombstones: 10,
		Restart: Budget{Share: 0.1, MinInterval: 10 * time.Minute}, Idle: Budget{Share: 0.1, MinInterval: 10 * time.Minute}}, func(string) {})
	for i := range 10 {
		st.ObserveWorkspace(running(wsName(i), digest(0)), t0)
	}
	now := t0
	poll := func(ds ...ccapi.Directive) DirectivePlan {
		t.Helper()
		st.SetDirectives(ds, now)
		plan := st.ToWrite(now)
		for _, d := range plan.Write {
			st.Written(d, true, now)
		}
		return plan
	}
	names := func(ds []ccapi.Directive) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Name+"@"+d.ArtifactHash[len(d.ArtifactHash)-1:])
		}
		return out
	}
	deferred := func(p DirectivePlan) []string {
		var out []string
		for _, w := range p.Deferred {
			out = append(out, w.Directive.Name+"@"+w.Directive.ArtifactHash[len(w.Directive.ArtifactHash)-1:]+" "+w.Reason)
			if !strings.Contains(w.Event.Note, "waits") || w.Event.Reason != "RestartDeferred" || w.Event.Ref.Name != w.Directive.Name {
				t.Errorf("the Event announcing %s: %+v", w.Directive.Name, w.Event)
			}
		}
		return out
	}
	check := func(step string, p DirectivePlan, wantWrite, wantDeferred []string, wantWaiting int) {
		t.Helper()
		if diff := cmp.Diff(wantWrite, names(p.Write)); diff != "" {
			t.Errorf("%s: written (-want, +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(wantDeferred, deferred(p)); diff != "" {
			t.Errorf("%s: began to wait (-want, +got):\n%s", step, diff)
		}
		if got := st.Counts().WaitingRestarts; got != wantWaiting {
			t.Errorf("%s: %d waiting, want %d", step, got, wantWaiting)
		}
	}
	// The rollout of a written restart completes: the pods run it.
	complete := func(name, hash string) {
		st.ObserveWorkspace(running(name, hash), now)
	}

	d := []ccapi.Directive{restartOf("ws-02", digest(1)), restartOf("ws-00", digest(1)), restartOf("ws-01", digest(1))}
	check("first poll", poll(d...), []string{"ws-00@1"}, []string{"ws-01@1 budget", "ws-02@1 budget"}, 2)
	now = now.Add(30 * time.Second)
	check("second poll, ws-00 still rolling", poll(d...), nil, nil, 2)

	complete("ws-00", digest(1))
	// Cluster Control removes the consumed directive; a newer hash for
	// ws-02 replaces its waiting one.
	d = []ccapi.Directive{restartOf("ws-01", digest(1)), restartOf("ws-02", digest(2))}
	now = now.Add(30 * time.Second)
	check("ws-00 done", poll(d...), []string{"ws-01@1"}, []string{"ws-02@2 budget"}, 1)

	// A directive for ws-03 arrives after ws-02's: ws-02 has waited
	// longer and goes first, its newer hash with it.
	d = append(d, restartOf("ws-03", digest(1)))
	now = now.Add(30 * time.Second)
	check("ws-03 arrives", poll(d...), nil, []string{"ws-03@1 budget"}, 2)
	complete("ws-01", digest(1))
	d = d[1:]
	now = now.Add(30 * time.Second)
	check("ws-01 done", poll(d...), []string{"ws-02@2"}, nil, 1)
	complete("ws-02", digest(2))
	d = d[1:]
	now = now.Add(30 * time.Second)
	check("ws-02 done", poll(d...), []string{"ws-03@1"}, nil, 0)
}

// TestStormNoneLost plays a Cluster Control that publishes a new hash for
// every workspace at every poll, on a fake clock, while rollouts take a
// minute or two and the hook server's syncs reach this reporter only half
// of the time (the other half go to the other replica), with a resync of
// every workspace each minute. Throughout, no more workspaces roll at
// once than the budget allows and no workspace starts two restarts within
// the least interval; once the storm ends, every workspace ends on the
// last hash published for it: no directive is lost.
func TestStormNoneLost(t *testing.T) {
	const fleet = 30
	b := Budget{Share: 0.1, MinInterval: 3 * time.Minute}
	st := New(Limits{Workspaces: 100, Tombstones: 10, Restart: b, Idle: b}, func(string) {})
	rnd := rand.New(rand.NewPCG(45, 2026))
	type ws struct {
		wanted, running string
		done            time.Time
		starts          []time.Time
	}
	w := map[string]*ws{}
	now := t0
	observe := func(name string, always bool) {
		if !always && rnd.IntN(2) == 0 {
			return
		}
		x := w[name]
		o := running(name, x.running)
		o.WantedArtifactHash = x.wanted
		if x.wanted != x.running {
			o.Phase = "Progressing"
		}
		st.ObserveWorkspace(o, now)
	}
	for i := range fleet {
		w[wsName(i)] = &ws{wanted: digest(0), running: digest(0)}
		observe(wsName(i), true)
	}
	last := map[string]string{}
	maxRolling, polls := 0, 0
	step := 10 * time.Second
	stormEnds := t0.Add(10 * time.Minute)
	for now.Before(stormEnds.Add(time.Hour)) {
		now = now.Add(step)
		// Rollouts complete; the syncs that show it may miss this reporter.
		for name, x := range w {
			if x.wanted != x.running && !now.Before(x.done) {
				x.running = x.wanted
				observe(name, false)
			}
		}
		if now.Sub(t0)%time.Minute == 0 {
			for name := range w {
				observe(name, false) // the resync, to either replica
			}
		}
		if now.Sub(t0)%(30*time.Second) != 0 {
			continue
		}
		polls++
		var ds []ccapi.Directive
		for i := range fleet {
			name := wsName(i)
			if now.Before(stormEnds) {
				last[name] = digest(polls*100 + i)
			}
			if h, ok := last[name]; ok && w[name].running != h {
				ds = append(ds, restartOf(name, h))
			}
		}
		st.SetDirectives(ds, now)
		for _, d := range st.ToWrite(now).Write {
			x := w[d.Name]
			if len(x.starts) > 0 && now.Sub(x.starts[len(x.starts)-1]) < b.MinInterval {
				t.Fatalf("%s: restarted at %v, %v after the last", d.Name, now.Sub(t0), now.Sub(x.starts[len(x.starts)-1]))
			}
			x.starts = append(x.starts, now)
			x.wanted, x.done = d.ArtifactHash, now.Add(time.Minute+time.Duration(rnd.IntN(60))*time.Second)
			st.Written(d, true, now)
			observe(d.Name, false)
		}
		rolling := 0
		for _, x := range w {
			if x.wanted != x.running {
				rolling++
			}
		}
		maxRolling = max(maxRolling, rolling)
		if rolling > b.limit(fleet) {
			t.Fatalf("at %v %d workspaces roll at once, the budget allows %d", now.Sub(t0), rolling, b.limit(fleet))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w)) {
		x := w[name]
		if x.running != last[name] || x.wanted != last[name] {
			t.Errorf("%s runs %s and asks for %s an hour after the storm; Cluster Control's last hash for it is %s", name, x.running, x.wanted, last[name])
		}
		for i := 1; i < len(x.starts); i++ {
			if d := x.starts[i].Sub(x.starts[i-1]); d < b.MinInterval {
				t.Errorf("%s: two restarts %v apart", name, d)
			}
		}
	}
	if maxRolling != b.limit(fleet) {
		t.Errorf("at most %d workspaces rolled at once; the storm should have used the whole budget of %d", maxRolling, b.limit(fleet))
	}
	if c := st.Counts(); c.WaitingRestarts != 0 {
		t.Errorf("directives still waiting after the storm: %v", c)
	}
}
