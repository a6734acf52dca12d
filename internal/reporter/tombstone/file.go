// Package tombstone keeps the reporter's unacknowledged deletions across a
// restart of the sidecar: the tombstone file, replaced atomically, read at
// start and rewritten whenever the state's tombstones change.
package tombstone

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/internal/reporter/state"
)

// Load reads the tombstone file; a missing file is an empty list.
func Load(path string) ([]state.Tombstone, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read tombstone file: %w", err)
	}
	var ts []state.Tombstone
	if err := json.Unmarshal(raw, &ts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return ts, nil
}

// ErrCorrupt is a tombstone file that does not decode. The file
// is replaced atomically, so only something else writing it gets here; the
// sidecar starts without those deletions rather than not at all.
var ErrCorrupt = errors.New("cannot decode tombstone file")

// write replaces the tombstone file atomically, so a crash
// mid-write leaves the previous list, never half of one.
func write(path string, ts []state.Tombstone) error {
	raw, err := json.Marshal(ts)
	if err != nil {
		return fmt.Errorf("cannot encode tombstones: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tombstones-*")
	if err != nil {
		return fmt.Errorf("cannot write tombstone file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("cannot write tombstone file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write tombstone file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write tombstone file: %w", err)
	}
	return nil
}

// SaveInterval is how often the periodic saver writes out
// tombstones that changed otherwise (delivered, expired). A hand-off batch
// that carries deletions writes the file itself before it is acknowledged,
// so a mass deletion costs one write per batch, not one per workspace; a
// file that cannot be written makes the batch fail, and the hook server
// hands it over again, rather than holding a deletion in memory only.
const SaveInterval = time.Second

// File is the tombstone file at a path. It serializes the writes, from
// the periodic saver and from a hand-off that carried deletions, and knows
// which generation of the tombstones the file holds.
type File struct {
	path  string
	mu    sync.Mutex
	saved uint64
}

// NewFile returns the tombstone file at path.
func NewFile(path string) *File { return &File{path: path} }

// Save writes the state's tombstones to the file if they changed since it
// was last written.
func (f *File) Save(st *state.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, gen := st.TombstoneList()
	if gen == f.saved {
		return nil
	}
	if err := write(f.path, ts); err != nil {
		return err
	}
	f.saved = gen
	return nil
}
