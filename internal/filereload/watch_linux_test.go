package filereload

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// countStats makes r count its stats in *n, and gives it a clock that
// moves only when the test says so.
func countStats[T any](r *Reloader[T], n *int) *fakeClock {
	clock := &fakeClock{t: time.Unix(5000, 0)}
	r.now = clock.now
	r.stat = func(paths []string) ([]stamp, error) {
		*n++
		return statAll(paths)
	}
	return clock
}

// TestReloaderSkipsStatWhileQuiet checks what inotify saves and what it
// must not change: while the kernel reports nothing, a Get costs no stat;
// any change to the file is still seen by the next Get; and the stat runs
// at least once every restatEvery regardless.
func TestReloaderSkipsStatWhileQuiet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "a", 1000)
	r := New(Options{Name: "toy"}, upper, path)
	if r.watch == nil {
		t.Fatal("no inotify instance on Linux: every Get would stat")
	}
	var stats int
	clock := countStats(r, &stats)
	get := func(reason, want string, wantStats int) {
		t.Helper()
		stats = 0
		got, err := r.Get()
		if err != nil {
			t.Fatalf("%s: %v", reason, err)
		}
		if diff := cmp.Diff([]any{want, wantStats}, []any{got, stats}); diff != "" {
			t.Errorf("%s\n(value, stats): -want, +got:\n%s", reason, diff)
		}
	}
	get("The first Get stats and reads.", "A", 1)
	for range 3 {
		get("Nothing changed: no stat.", "A", 0)
	}
	write(t, path, "b", 1000)
	get("A write is reported: the next Get stats, finds the same stamp and keeps the value (the rule is stat-based).", "A", 1)
	get("Quiet again after that stat.", "A", 0)
	write(t, filepath.Join(filepath.Dir(path), "neighbour"), "x", 1000)
	get("A change to another file of the directory costs a stat, and no new watch (which would stat again).", "A", 1)
	write(t, path, "cc", 1001)
	get("A write that changes the stamp is read at once; the file is watched again where it is now, and stat'ed again after that.", "CC", 2)
	clock.advance(restatEvery - time.Nanosecond)
	get("Just before restatEvery: still no stat.", "CC", 0)
	clock.advance(time.Nanosecond)
	get("At restatEvery the files are stat'ed even though nothing was reported.", "CC", 1)
	get("And the period starts again.", "CC", 0)
}

// TestReloaderWatchesForMissingFile checks that a missing file, which
// refuses everything, costs its Gets no stat while nothing is created where
// it would be, and that its creation is seen by the next Get: also when a
// directory on the way is missing too, and when the file goes again.
func TestReloaderWatchesForMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f")
	r := New(Options{Name: "toy"}, upper, path)
	var stats int
	clock := countStats(r, &stats)
	get := func(reason, want string, wantStats int) {
		t.Helper()
		stats = 0
		got, err := r.Get()
		if (err == nil) != (want != "") {
			t.Fatalf("%s: %q, %v", reason, got, err)
		}
		if diff := cmp.Diff([]any{want, wantStats}, []any{got, stats}); diff != "" {
			t.Errorf("%s\n(value, stats): -want, +got:\n%s", reason, diff)
		}
	}
	get("The first Get stats and finds neither the directory nor the file.", "", 1)
	get("Nothing created: no stat.", "", 0)
	write(t, filepath.Join(dir, "other"), "x", 1000)
	// A stat that fails after an event resolves the path again, and stats
	// once more: the event may have been a directory on the way created.
	get("Something else created beside the missing directory: still missing.", "", 2)
	get("Quiet again.", "", 0)
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	get("The directory created: watched there, still no file.", "", 2)
	get("Quiet in the new directory.", "", 0)
	write(t, path, "a", 1000)
	get("The file created: read at once, and watched where it is (a second stat).", "A", 2)
	get("Quiet with the file.", "A", 0)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	get("The file removed: refused at once (its own watch went with it, so no second stat).", "", 1)
	get("Missing again, and quiet.", "", 0)
	clock.advance(restatEvery)
	get("At restatEvery a missing file is stat'ed, and resolved again.", "", 2)
}

// TestReloaderSeesKubeletSwap updates a Secret volume as the kubelet does:
// the file is reached through the symlinks token -> ..data/token and
// ..data -> a timestamped directory, and an update writes a new directory,
// swaps ..data by renaming a new symlink over it and then removes the old
// directory. The new token has the same size and time as the old one, so
// only the swap tells them apart, and it must be seen before the old
// directory goes. The token is reached from another
// directory too, through a symlink of its own, as a file mounted
// elsewhere and linked in would be.
func TestReloaderSeesKubeletSwap(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(map[bool]string{false: "InVolume", true: "LinkedFromElsewhere"}[linked], func(t *testing.T) {
			vol := t.TempDir()
			writeDir := func(name, token string) {
				t.Helper()
				if err := os.Mkdir(filepath.Join(vol, name), 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(vol, name, "token"), token, 1000)
			}
			symlink := func(target, link string) {
				t.Helper()
				if err := os.Symlink(target, link); err != nil {
					t.Fatal(err)
				}
			}
			writeDir("..2026_12_03_01", "a")
			symlink("..2026_12_03_01", filepath.Join(vol, "..data"))
			symlink("..data/token", filepath.Join(vol, "token"))
			path := filepath.Join(vol, "token")
			if linked {
				path = filepath.Join(t.TempDir(), "token")
				symlink(filepath.Join(vol, "token"), path)
			}

			r := New(Options{Name: "toy"}, upper, path)
			var stats int
			countStats(r, &stats)
			for range 3 {
				if v, err := r.Get(); err != nil || v != "A" {
					t.Fatalf("Get before the swap: %q, %v", v, err)
				}
			}
			if stats != 1 {
				t.Fatalf("%d stats before the swap; want 1 (the first Get's)", stats)
			}
			writeDir("..2026_12_03_02", "b")
			symlink("..2026_12_03_02", filepath.Join(vol, "..data_tmp"))
			if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
				t.Fatal(err)
			}
			if v, err := r.Get(); err != nil || v != "B" {
				t.Errorf("Get right after the swap, the clock not moved: %q, %v; want the new token", v, err)
			}
			// The kubelet then removes the old directory; nothing changes.
			if err := os.RemoveAll(filepath.Join(vol, "..2026_12_03_01")); err != nil {
				t.Fatal(err)
			}
			if v, err := r.Get(); err != nil || v != "B" {
				t.Errorf("Get after the old directory went: %q, %v", v, err)
			}
		})
	}
}

// TestReloaderUnreportedChange renames a directory above the file's own
// and puts a new file where the old one was: inotify reports nothing about
// the watched directory or file, so the change is seen only by the stat
// that restatEvery forces.
func TestReloaderUnreportedChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x", "y", "f")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, "a", 1000)
	r := New(Options{Name: "toy"}, upper, path)
	var stats int
	clock := countStats(r, &stats)
	if v, err := r.Get(); err != nil || v != "A" {
		t.Fatalf("first Get: %q, %v", v, err)
	}
	if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "x.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, path, "bb", 1001)
	if v, _ := r.Get(); v != "A" {
		t.Errorf("Get within restatEvery saw %q; the change was not one inotify reports, so this test no longer shows the limit", v)
	}
	clock.advance(restatEvery)
	if v, err := r.Get(); err != nil || v != "BB" {
		t.Errorf("Get after restatEvery: %q, %v; want the new file", v, err)
	}
}

// TestReloaderWithoutWatch runs the rules where there is no inotify
// instance (another OS, or none left for the user): every Get stats.
func TestReloaderWithoutWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "a", 1000)
	r := New(Options{Name: "toy"}, upper, path)
	r.watch = nil
	var stats int
	countStats(r, &stats)
	for range 3 {
		if v, err := r.Get(); err != nil || v != "A" {
			t.Fatalf("Get: %q, %v", v, err)
		}
	}
	write(t, path, "bb", 1001)
	if v, err := r.Get(); err != nil || v != "BB" {
		t.Errorf("Get after a change: %q, %v", v, err)
	}
	if stats != 4 {
		t.Errorf("%d stats for 4 Gets without a watch; want one each", stats)
	}
}

// TestWatchesReleased checks that a collected Reloader gives up its
// watches, and that a Reloader watching the same file as one collected
// still sees its changes: the kernel gives both one watch descriptor.
func TestWatchesReleased(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	write(t, shared, "a", 1000)
	keep := New(Options{Name: "keep"}, upper, shared)
	if _, err := keep.Get(); err != nil {
		t.Fatal(err)
	}
	before := watchCount()
	func() {
		for i := range 200 {
			path := filepath.Join(dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26)))
			write(t, path, "x", 1000)
			r := New(Options{Name: "dropped"}, upper, path)
			if _, err := r.Get(); err != nil {
				t.Fatal(err)
			}
			other := New(Options{Name: "dropped"}, upper, shared)
			if _, err := other.Get(); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if grew := watchCount() - before; grew < 200 {
		t.Fatalf("200 more files watched, but only %d more descriptors", grew)
	}
	deadline := time.Now().Add(10 * time.Second)
	for watchCount() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := watchCount(); n > before {
		t.Errorf("%d descriptors after the Reloaders were collected; want %d", n, before)
	}
	var stats int
	countStats(keep, &stats)
	write(t, shared, "bb", 1001)
	if v, err := keep.Get(); err != nil || v != "BB" {
		t.Errorf("the kept Reloader, after those sharing its file were collected: %q, %v", v, err)
	}
}

func watchCount() int {
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	return len(inotify.owners)
}
