package reporter

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestTombstonesSurviveRestart hands a deletion to a sidecar that cannot
// reach Cluster Control and stops it: a new sidecar started on the same
// tombstone file delivers the deletion, with the time it was observed.
func TestTombstonesSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tombstones.json")
	observed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// Nothing listens on port 1 of loopback.
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.TombstoneFile = file
	cfg.now = func() time.Time { return observed }
	first := newReporter(t, cfg)
	mustObserve(t, first, observation.Observation{WorkspaceDeleted: &observation.WorkspaceRef{Namespace: "team-a", Name: "shop", UID: "u-1"}})
	runLoops(t, first.runWorkspaceSender, first.runTombstoneSaver)
	testsync.WaitFor(t, "the tombstone file", func() bool {
		_, err := os.Stat(file)
		return err == nil
	})

	cc, url := startCC(t, clustercontrol.Options{})
	cfg = fastConfig(url)
	cfg.TombstoneFile = file
	second := newReporter(t, cfg)
	runLoops(t, second.runWorkspaceSender, second.runTombstoneSaver)
	testsync.WaitFor(t, "the deletion at Cluster Control", func() bool { return len(cc.WorkspaceReports()) > 0 })
	got := cc.WorkspaceReports()[0]
	want := ccapi.WorkspaceStatusReport{Namespace: "team-a", Name: "shop", ObservedAt: observed, ReportedAt: got.ReportedAt, Deleted: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivered deletion (-want, +got):\n%s", diff)
	}
	testsync.WaitFor(t, "the acknowledged tombstone to leave the file", func() bool {
		ts, err := loadTombstones(file)
		return err == nil && len(ts) == 0
	})
}

// TestTombstoneFileAtStart checks what New makes of the file: a missing or
// undecodable one starts empty, one that cannot be read is a broken pod
// spec.
func TestTombstoneFileAtStart(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		path   string
		want   error
	}{
		"Missing": {reason: "the first start has no file", path: filepath.Join(dir, "nope.json")},
		"Garbage": {reason: "a file that does not decode loses its deletions, not the sidecar", path: garbage},
		"Directory": {reason: "a path that cannot be read as a file is a mistake in the pod spec",
			path: dir, want: cmpopts.AnyError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := fastConfig("http://127.0.0.1:1")
			cfg.TombstoneFile = tc.path
			_, err := New(cfg)
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nNew: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
