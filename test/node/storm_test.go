package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvStorm set to 1 runs TestDirectiveStorm (make test-storm).
const EnvStorm = "FORMSPEC_STORM"

// The storm's shape: Cluster Control publishes a new hash for every
// workspace every stormPeriod for stormLength, and the reporters keep a
// budget of stormShare of the fleet at once and stormInterval between two
// restarts of a workspace. The interval is shorter than the default's ten
// minutes so that a storm of two minutes sees workspaces asked again
// within it and after it; the share is the default, which binds at once
// on a fleet of a few dozen.
const (
	stormPeriod   = 5 * time.Second
	stormLength   = 2 * time.Minute
	stormShare    = 0.1
	stormInterval = 90 * time.Second
	// stormPoll is the reporters' --deploy-status-interval: a storm of two
	// minutes at the default 30 s would be four polls.
	stormPoll = 2 * time.Second
)

// TestDirectiveStorm plays a Cluster Control gone wrong (or taken over)
// on the one-node cluster: for stormLength it publishes a new artifact
// hash for every workspace of the fleet every stormPeriod, through the
// reference server's admin API. Sampled twice a second through the run,
// no more workspaces may be restarting at once (asking for a hash their
// pods do not run yet) than the budget allows, and no workspace may be
// asked for a new hash sooner than the least interval after the last;
// once the storm ends, every directive must be applied: each workspace
// runs the last hash published for it (status.artifactHash), within a
// bound. The figures it logs are docs/reporter.md's.
func TestDirectiveStorm(t *testing.T) {
	mcBin := requireSuite(t, EnvStorm, "test-storm")
	root := controlplane.RepoRoot(t)
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	values := fmt.Sprintf(`defaultVersion: %s
image:
  repository: %s
  tag: %s
  pullPolicy: Never
reporter:
%s  restartBudget:
    share: %v
    minInterval: %v
  extraArgs: [--deploy-status-interval=%v]
`, WorkspaceVersion, repo, tag, plainHTTPReporterValues, stormShare, stormInterval, stormPoll)
	f := startFleet(t, mcBin, nil, filepath.Join(root, chartDir), values)
	members := f.members()
	budget := max(1, int(stormShare*float64(len(members))+1e-9))

	sampler := f.sampleRestarts(t)
	start := time.Now()
	last := map[string]string{}
	published := 0
	for round := 0; time.Since(start) < stormLength; round++ {
		for _, w := range members {
			h := stormHash(round, w.key())
			putDirective(t, f.admin, w.ns, w.name, h)
			last[w.key()] = h
			published++
		}
		time.Sleep(time.Until(start.Add(time.Duration(round+1) * stormPeriod)))
	}
	ended := time.Now()
	f.tm.Phase(fmt.Sprintf("storm: %d hashes published for %d workspaces in %.0f s", published, len(members), ended.Sub(start).Seconds()))
	during := sampler.snapshot()

	// Every directive is applied once the storm ends: each workspace runs
	// the last hash published for it. What is left is paced by the least
	// interval and the budget: a wave of budget restarts at a time, each a
	// rollout and a poll or two, or a workspace resync when no sync that
	// showed a rollout's end reached the writing reporter's replica. The
	// bound is generous against all of it.
	bound := stormInterval + time.Duration(len(members)/budget+1)*time.Minute
	var applied time.Duration
	for {
		listed, err := f.listWorkspaces()
		var behind []string
		for _, w := range members {
			if ws := listed[w.key()]; err != nil || ws.Status.ArtifactHash != last[w.key()] {
				behind = append(behind, fmt.Sprintf("%s runs %s", w.key(), short(ws.Status.ArtifactHash)))
			}
		}
		if err == nil && len(behind) == 0 {
			applied = time.Since(ended)
			break
		}
		if time.Since(ended) > bound {
			t.Fatalf("%d of %d workspaces are not on the last hash published for them %v after the storm (bound %v; err %v): %s",
				len(behind), len(members), time.Since(ended).Round(time.Second), bound, err, strings.Join(behind, ", "))
		}
		time.Sleep(time.Second)
	}
	after := sampler.stop()
	f.waitConverged(t, "after the storm", waitTimeout)
	f.tm.Phase("every directive applied")

	if after.maxRestarting > budget {
		t.Errorf("%d workspaces were restarting at once (at %v: %s); the budget allows %d (%v of %d)", after.maxRestarting,
			after.maxAt.Sub(start).Round(time.Second), strings.Join(after.maxKeys, ", "), budget, stormShare, len(members))
	}
	if during.maxRestarting < budget {
		t.Errorf("at most %d workspaces restarted at once during the storm: the budget of %d never bound, so the test shows nothing", during.maxRestarting, budget)
	}
	// A change is seen up to one sample late and one early.
	if after.minGap < stormInterval-2*sampleEvery {
		t.Errorf("workspace %s was asked for a new hash %v after the last (%v and %v); the least interval is %v",
			after.minGapKey, after.minGap.Round(100*time.Millisecond), after.minGapAt[0].Sub(start).Round(time.Second), after.minGapAt[1].Sub(start).Round(time.Second), stormInterval)
	}
	// Each restart is reported consumed once its pods run the hash, by
	// whichever reporter sees that sync: Cluster Control is left with none.
	f.c.waitFor(t, "Cluster Control to hold no restart directive", func() (bool, string) {
		st, err := clusterControlState(f.admin)
		if err != nil {
			return false, err.Error()
		}
		var held []string
		for _, d := range st.Directives {
			if d.Action == ccapi.ActionRestartRequired {
				held = append(held, d.Namespace+"/"+d.Name)
			}
		}
		return len(held) == 0, strings.Join(held, ", ")
	}, hooksNamespace)
	writers, _ := f.c.reporterMetric(t, "formspec_reporter_directive_writer")
	deferred, _ := f.c.reporterMetric(t, "formspec_reporter_directives_deferred_total")
	if writers != 1 {
		t.Errorf("%v reporters write directives, want exactly one", writers)
	}
	if deferred == 0 {
		t.Errorf("no directive was deferred in a storm past the budget")
	}
	deferredEvents := 0
	for _, w := range members {
		if f.c.hasEvent(t, w.ns, "Workspace", w.name, "RestartDeferred") {
			deferredEvents++
		}
	}
	if deferredEvents == 0 {
		t.Errorf("no Workspace has a RestartDeferred Event")
	}
	t.Logf("figures: %d workspaces, budget %d at once (share %v) and %v between two restarts of one; storm of %.0f s, a new hash for each every %v (%d published); restarts begun %d (%d during the storm); at most %d restarting at once (%d during the storm); shortest interval between two restarts of one workspace %.1f s (%s); every workspace on its last hash %.1f s after the storm; %v directives deferred, %d Workspaces with a RestartDeferred Event; %d samples",
		len(members), budget, stormShare, stormInterval, ended.Sub(start).Seconds(), stormPeriod, published, after.restarts, during.restarts,
		after.maxRestarting, during.maxRestarting, after.minGap.Seconds(), after.minGapKey, applied.Seconds(), deferred, deferredEvents, after.samples)
}

// sampleEvery is how often the storm's sampler lists the Workspaces.
const sampleEvery = 500 * time.Millisecond

// stormHash is the hash Cluster Control publishes for a workspace in a
// round of the storm: a digest, as the reporter requires.
func stormHash(round int, key string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("storm %d %s", round, key)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// short is a hash's first digits, for messages.
func short(h string) string {
	if len(h) > 15 {
		return h[:15]
	}
	return cmp.Or(h, "nothing")
}

// restartSamples is what the storm's sampler saw.
type restartSamples struct {
	samples int
	// maxRestarting is the most workspaces asking for a hash their pods
	// did not run yet in one sample, at maxAt: maxKeys.
	maxRestarting int
	maxAt         time.Time
	maxKeys       []string
	// restarts counts the changes of a workspace's requested hash.
	restarts int
	// minGap is the shortest time between two changes of one
	// workspace's requested hash, minGapKey's, seen at minGapAt.
	minGap    time.Duration
	minGapKey string
	minGapAt  [2]time.Time
}

// restartSampler lists the fleet's Workspaces every sampleEvery until
// stopped.
type restartSampler struct {
	mu      sync.Mutex
	s       restartSamples
	changed map[string]time.Time
	wanted  map[string]string
	cancel  context.CancelFunc
	done    chan struct{}
}

// sampleRestarts starts sampling the fleet: how many workspaces restart at
// once, and when each is asked for a new hash.
func (f *fleet) sampleRestarts(t *testing.T) *restartSampler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rs := &restartSampler{s: restartSamples{minGap: time.Hour}, changed: map[string]time.Time{}, wanted: map[string]string{},
		cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { rs.stop() })
	go func() {
		defer close(rs.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			listed, err := f.listWorkspaces()
			if err != nil {
				continue // the API server is not restarted here; a blip
			}
			rs.sample(listed, time.Now())
		}
	}()
	return rs
}

// sample records one listing of the fleet.
func (rs *restartSampler) sample(listed map[string]observedWorkspace, at time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.s.samples++
	var restarting []string
	for _, key := range slices.Sorted(maps.Keys(listed)) {
		ws := listed[key]
		want := ws.Metadata.Annotations[v1alpha1.AnnotationArtifactBinaryHash]
		if want != "" && want != ws.Status.ArtifactHash {
			restarting = append(restarting, key)
		}
		prev, seen := rs.wanted[key]
		rs.wanted[key] = want
		if !seen || prev == want {
			continue
		}
		rs.s.restarts++
		if before, ok := rs.changed[key]; ok && at.Sub(before) < rs.s.minGap {
			rs.s.minGap, rs.s.minGapKey, rs.s.minGapAt = at.Sub(before), key, [2]time.Time{before, at}
		}
		rs.changed[key] = at
	}
	if len(restarting) > rs.s.maxRestarting {
		rs.s.maxRestarting, rs.s.maxAt, rs.s.maxKeys = len(restarting), at, restarting
	}
}

// snapshot returns what the sampler has seen so far.
func (rs *restartSampler) snapshot() restartSamples {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.s
}

// stop ends the sampling and returns what it saw.
func (rs *restartSampler) stop() restartSamples {
	rs.cancel()
	<-rs.done
	return rs.snapshot()
}
