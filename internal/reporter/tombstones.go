package reporter

import (
	"context"
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

// loadTombstones reads the tombstone file; a missing file is an empty list.
func loadTombstones(path string) ([]state.Tombstone, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read tombstone file: %w", err)
	}
	var ts []state.Tombstone
	if err := json.Unmarshal(raw, &ts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errCorruptTombstones, path, err)
	}
	return ts, nil
}

// errCorruptTombstones is a tombstone file that does not decode. The file
// is replaced atomically, so only something else writing it gets here; the
// sidecar starts without those deletions rather than not at all.
var errCorruptTombstones = errors.New("cannot decode tombstone file")

// saveTombstones replaces the tombstone file atomically, so a crash
// mid-write leaves the previous list, never half of one.
func saveTombstones(path string, ts []state.Tombstone) error {
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

// tombstoneSaveInterval is how often the periodic saver writes out
// tombstones that changed otherwise (delivered, expired). A hand-off batch
// that carries deletions writes the file itself before it is acknowledged,
// so a mass deletion costs one write per batch, not one per workspace; a
// file that cannot be written makes the batch fail, and the hook server
// hands it over again, rather than holding a deletion in memory only.
const tombstoneSaveInterval = time.Second

// tombstoneSaver serializes the writes of the tombstone file, from the
// periodic saver and from a hand-off that carried deletions, and knows
// which generation of the tombstones the file holds.
type tombstoneSaver struct {
	mu    sync.Mutex
	saved uint64
}

// saveTombstones writes the tombstone file if the tombstones changed since
// it was last written.
func (r *Reporter) saveTombstones() error {
	if r.cfg.TombstoneFile == "" {
		return nil
	}
	r.tombs.mu.Lock()
	defer r.tombs.mu.Unlock()
	ts, gen := r.st.TombstoneList()
	if gen == r.tombs.saved {
		return nil
	}
	if err := saveTombstones(r.cfg.TombstoneFile, ts); err != nil {
		return err
	}
	r.tombs.saved = gen
	return nil
}

// runTombstoneSaver keeps the tombstone file in step with the state, and
// writes it a last time when ctx ends. A deletion handed over by the hook
// server is written before it is acknowledged (serveObservations); this
// catches what changes otherwise: an acknowledgement by Cluster Control,
// a tombstone evicted or restored.
func (r *Reporter) runTombstoneSaver(ctx context.Context) {
	if r.cfg.TombstoneFile == "" {
		return
	}
	save := func() {
		if err := r.saveTombstones(); err != nil {
			if ok, held := r.limiter.allow(logKeyTombstones, r.cfg.now()); ok {
				r.log.Warn("cannot save tombstones; deletions not yet reported may be lost in a restart", "suppressed", held, "err", err)
			}
		}
	}
	for r.cfg.sleep(ctx, tombstoneSaveInterval) == nil {
		save()
	}
	save()
}
