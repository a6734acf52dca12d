package reporter

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/tombstone"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
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
		ts, err := tombstone.Load(file)
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

// TestDeletionDurableOnceAcknowledged posts deletions to the localhost API
// of a sidecar whose loops do not run (no periodic save): the 204 comes
// only once the tombstone file holds them, so a sidecar killed right
// after loses nothing the hook server considers delivered. A file that
// cannot be written gets a 503, which makes the hook server keep the
// batch and post it again.
func TestDeletionDurableOnceAcknowledged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tombstones.json")
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.TombstoneFile = file
	r := newReporter(t, cfg)
	srv := httptest.NewServer(r.LocalHandler())
	defer srv.Close()
	post := func(name string) int {
		t.Helper()
		body := `{"observations":[{"workspaceDeleted":{"namespace":"team-a","name":"` + name + `"}}]}`
		resp, err := http.Post(srv.URL+observation.PathObservations, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	saved := func() []string {
		t.Helper()
		ts, err := tombstone.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tb := range ts {
			names = append(names, tb.Name)
		}
		return names
	}

	if got := post("shop"); got != http.StatusNoContent {
		t.Fatalf("POST a deletion: status %d, want %d", got, http.StatusNoContent)
	}
	if diff := cmp.Diff([]string{"shop"}, saved()); diff != "" {
		t.Errorf("tombstone file once the deletion is acknowledged: -want, +got:\n%s", diff)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := post("blog"); got != http.StatusServiceUnavailable {
		t.Errorf("POST a deletion the file cannot keep: status %d, want %d", got, http.StatusServiceUnavailable)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := post("blog"); got != http.StatusNoContent {
		t.Errorf("POST the same deletion again: status %d, want %d", got, http.StatusNoContent)
	}
	if diff := cmp.Diff([]string{"blog", "shop"}, saved()); diff != "" {
		t.Errorf("tombstone file after the deletion was posted again: -want, +got:\n%s", diff)
	}
}
