package tombstone

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestFileKeepsDeletions saves a state's deletions and loads them back,
// writes the file again only when they change, and tells a file that does
// not decode from one that is missing.
func TestFileKeepsDeletions(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "tombstones.json")
	st := state.New(state.Limits{Workspaces: 10, Tombstones: 10}, func(string) {})
	st.DeleteWorkspace(&observation.WorkspaceRef{Namespace: "ns", Name: "shop", UID: "u1"}, t0)
	f := NewFile(path)
	if err := f.Save(st); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.Tombstone{{Namespace: "ns", Name: "shop", UID: "u1", ObservedAt: t0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loaded tombstones (-want, +got):\n%s", diff)
	}

	// Unchanged tombstones are not written again: a file removed behind
	// the saver's back stays removed.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file was written again with nothing changed: %v", err)
	}

	cases := map[string]struct {
		reason  string
		content *string
		want    error
	}{
		"Missing": {reason: "the first start has no file: no deletions"},
		"Garbage": {reason: "a file that does not decode is told apart, so the sidecar can start without it",
			content: new("{not json"), want: ErrCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tombstones.json")
			if tc.content != nil {
				if err := os.WriteFile(p, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ts, err := Load(p)
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nLoad error (-want, +got):\n%s", tc.reason, diff)
			}
			if len(ts) != 0 {
				t.Errorf("%s\nLoad returned %v, want none", tc.reason, ts)
			}
		})
	}
}
