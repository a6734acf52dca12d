package node

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// upgradeFrom is the file naming the git revision TestUpgrade upgrades
// from, relative to test/node.
const upgradeFrom = "testdata/upgrade-from"

// previousHooksImage is the image built from that revision, imported
// beside the release's image under a tag of its own.
const previousHooksImage = "ghcr.io/formspec/formspec-hooks:node-test-previous"

// rollsOnUpgrade names each change since the previous revision that makes
// the hooks render another pod template for some workspaces, with a test
// of which workspaces it rolls. CHANGELOG.md lists each under "Rolls
// workspaces" by this name (TestUpgrade checks that the two agree): an
// upgrade restarts every workspace such a change touches, at once, and
// TestUpgrade wants exactly one new ReplicaSet for each of those and none
// for the others. Nothing else changes the pod templates: the upgrade
// keeps the workspace image tag the previous install ran (defaultVersion,
// which that install was given and which --reset-then-reuse-values
// keeps).
var rollsOnUpgrade = map[string]func(*fleetWorkspace) bool{
	// None since 0.2.0. The workspace hook now reads the reporter's claims
	// summary instead of related claims; until the summary is written a
	// running workspace keeps its children as they are, and the summary
	// gives the hook the claims it related before, so nothing rolls.
}

// TestUpgrade installs the chart and image of the previous version (built
// from the revision testdata/upgrade-from names) on the one-node cluster
// with Metacontroller, creates workspaces of every class shape with
// claims, and upgrades the release to this checkout with helm upgrade
// --reset-then-reuse-values (Helm's library), the CRDs first, as
// docs/install.md says, while Metacontroller keeps syncing them. During
// the upgrade and one resync after it, until the workspaces a change of
// rollsOnUpgrade rolls have rolled and one resync more, and until the
// fleet has converged again, each of those workspaces must get exactly
// one new ReplicaSet (and stay Ready while it rolls out) and every other
// none; no credentials Secret may be recreated, no hook call fail (but a
// sync in flight that the recreation of its controller cancels) and no
// Workspace leave Ready.
func TestUpgrade(t *testing.T) {
	mcBin := requireSuite(t, EnvUpgrade, "test-upgrade")
	root := controlplane.RepoRoot(t)
	checkChangelogRolls(t, root)
	rev := previousRevision(t)
	previous := exportRevision(t, root, rev)
	work := t.TempDir()
	img, err := HooksImageFrom(previous, work, Build{Args: map[string]string{"REVISION": rev}})
	if err != nil {
		t.Fatalf("cannot build the image of %s: %v", rev, err)
	}
	img.Name = previousHooksImage
	archive := filepath.Join(work, "previous-hooks.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	repo, oldTag, _ := strings.Cut(previousHooksImage, ":")
	_, newTag, _ := strings.Cut(hooksImage(t), ":")
	f := startFleet(t, mcBin, []string{archive}, filepath.Join(previous, chartDir),
		// The previous chart's reporter calls https by default too, and the
		// tests' Cluster Control serves plain HTTP.
		fmt.Sprintf("defaultVersion: %s\nimage:\n  repository: %s\n  tag: %s\n  pullPolicy: Never\n", WorkspaceVersion, repo, oldTag)+plainHTTPClusterControl)
	f.tm.Phase("the previous version (" + rev[:7] + ") installed")

	chart := filepath.Join(root, chartDir)
	var expected []string
	for _, wk := range f.members() {
		for _, rolls := range rollsOnUpgrade {
			if rolls(wk) {
				expected = append(expected, wk.key())
				break
			}
		}
	}
	// A claim's status reaches its workspace when Metacontroller next syncs
	// the claim: the upgrade changes nothing a claim is synced for, so that
	// is the ResourceClaim controller's resync, at the latest one period
	// (of the chart that started it, or of this one, should Metacontroller
	// restart the controller) after the upgrade.
	claimResync := max(resyncPeriod(t, filepath.Join(previous, chartDir), "resourceclaim"), resyncPeriod(t, chart, "resourceclaim"))
	w := f.open(t)
	var rolled, rolls time.Duration
	var recreations [][2]time.Time
	touched, _ := f.driveDuring(func() {
		// Helm creates crds/ on a first install only.
		f.c.kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(chart, "crds"))
		// The chart's reporter now calls https by default; the tests'
		// Cluster Control serves plain HTTP, so the upgrade says so, as
		// CHANGELOG.md tells an install with one to.
		since := time.Now()
		generations := f.c.controllerGenerations(t)
		f.helm.upgrade(t, chart, append([]string{"image.tag=" + newTag}, plainHTTPClusterControlSets...)...)
		f.chart = chart
		// Metacontroller recreates each controller whose spec changed
		// (from 0.1.0: the generated CA is in it now).
		now := f.c.controllerGenerations(t)
		maps.DeleteFunc(generations, func(name string, gen int64) bool { return now[name] == gen })
		f.c.waitControllersRestarted(t, generations, since)
		recreations = append(recreations, [2]time.Time{since, time.Now()})
		f.c.waitRolledOut(t, hooksNamespace, hooksName)
		rolled = time.Since(w.start)
		f.resync = max(f.resync, resyncPeriod(t, chart, "workspace"))
		f.settle()
		if len(expected) > 0 {
			if waiting := f.waitNewReplicaSets(t, w, expected, claimResync+2*f.resync); len(waiting) > 0 {
				// The checks below say which, with the rest of the figures.
				t.Logf("%d workspaces expected to roll got no new ReplicaSet within %v", len(waiting), claimResync+2*f.resync)
			}
			rolls = time.Since(w.start)
			// One resync more, in which a second roll would show.
			f.settle()
		}
		// The rollouts may outlast the resync on a busy machine; each
		// must end in the window.
		f.waitConverged(t, "the upgraded fleet", 10*time.Minute)
	})
	f.tm.Phase("upgraded, rolls and one resync watched, converged")
	for _, p := range f.c.hookPods(t) {
		for _, c := range p.Spec.Containers {
			if c.Image != hooksImage(t) {
				t.Errorf("hook pod %s container %s runs %s after the upgrade, want %s", p.Name, c.Name, c.Image, hooksImage(t))
			}
		}
	}
	allow, cancelled := cancelledByRecreation(recreations)
	d := f.requireUndisturbed(t, w, expectation{rollOnce: expected, allow: allow})
	t.Logf("%d syncs in flight were cancelled by the recreation of their controller, and done again", *cancelled)
	t.Logf("upgraded from %s: hook pods rolled in %.1f s, workspaces expected to roll had rolled by %.1f s; %d workspaces watched for %.0f s, %d touched; failed hook calls %d, left Ready/Idle %d, new ReplicaSets %d (exactly one expected for each of %d workspaces, none for the other %d; %d workspaces with another count), recreated credentials Secrets %d",
		rev[:7], rolled.Seconds(), rolls.Seconds(), len(w.steady), time.Since(w.start).Seconds(), touched, len(d.failedCalls), len(d.leftSteady),
		len(d.newReplicaSets), len(expected), len(w.steady)-len(expected), len(d.wrongRolls), len(d.recreatedSecrets))
}

// waitNewReplicaSets waits, for at most limit, until each workspace of
// keys has got a new ReplicaSet since w opened, and returns those that
// have not.
func (f *fleet) waitNewReplicaSets(t *testing.T, w *window, keys []string, limit time.Duration) []string {
	t.Helper()
	start := time.Now()
	for {
		created := f.newReplicaSets(t, w)
		waiting := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return len(created[k]) > 0 })
		if len(waiting) == 0 || time.Since(start) > limit {
			return waiting
		}
		time.Sleep(time.Second)
	}
}

// previousRevision reads the revision testdata/upgrade-from names.
func previousRevision(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(upgradeFrom)
	if err != nil {
		t.Fatal(err)
	}
	var revs []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			revs = append(revs, line)
		}
	}
	if len(revs) != 1 || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(revs[0]) {
		t.Fatalf("%s must name one full commit hash, not %q", upgradeFrom, revs)
	}
	return revs[0]
}

// exportRevision writes the tree of a revision of the repository at root
// into a new directory outside it (git archive, unpacked here) and
// returns that directory.
func exportRevision(t *testing.T, root, rev string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("git archive %s: %v (git is needed, as in any clone)", rev, err)
	}
	if err := untarFrom(out, dir); err != nil {
		t.Fatalf("git archive %s: %v", rev, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, stderr.String())
	}
	return dir
}

// checkChangelogRolls checks that the "Rolls workspaces" heading of
// CHANGELOG.md's unreleased entry says what rollsOnUpgrade expects:
// "None." when nothing rolls, and each expected change by name otherwise.
func checkChangelogRolls(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The entry of this checkout's version: Unreleased on main (a -dev
	// version), the release's own once VERSION says it (the commit that
	// cuts it); buildinfo.ChangelogHeading's rule, whose package this
	// module does not import (its metrics library).
	heading := "## [" + releaseVersion(t) + "]"
	if strings.HasSuffix(releaseVersion(t), "-dev") {
		heading = "## [Unreleased]"
	}
	m := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(heading) + `.*?### Rolls workspaces\n(.*?)\n(?:###|## )`).FindSubmatch(b)
	if m == nil {
		t.Fatalf(`CHANGELOG.md: no "### Rolls workspaces" heading under %q`, heading)
	}
	section := strings.TrimSpace(string(m[1]))
	if len(rollsOnUpgrade) == 0 {
		if !strings.HasPrefix(section, "None") {
			t.Errorf("CHANGELOG.md lists changes that roll workspaces, but TestUpgrade expects none (rollsOnUpgrade):\n%s", section)
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(rollsOnUpgrade)) {
		if !strings.Contains(section, name) {
			t.Errorf("CHANGELOG.md's Rolls workspaces does not name %q, which TestUpgrade expects to roll workspaces", name)
		}
	}
}
