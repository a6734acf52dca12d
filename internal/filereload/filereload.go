// Package filereload is the one way this project reads credentials from
// files that change under a running process: serving certificates, client
// CA bundles and bearer tokens, mounted from Secrets that the kubelet,
// cert-manager or an operator rotate in place.
//
// Three rules hold for every such file:
//
//   - Changed: a file has changed when os.Stat reports a different file
//     (Kubernetes swaps a mounted Secret by moving a symlink), a different
//     modification time or a different size. Each Get stats the files and
//     reads them again then. On Linux a Get skips the stat while inotify
//     has reported nothing about the files since the last one, and that
//     one is less than a second old: a change the kernel reports (a write,
//     a rename, a removal, a symlink swapped, in the file's directory or
//     in that of a symlink on the way to it) is seen by the next Get as
//     before, one it cannot report (a directory further up renamed, a
//     network file system changed from another machine) within a second.
//   - Re-validated: a value is trusted for at most Options.Revalidate
//     (DefaultRevalidate) after the files were last read; the first Get
//     after that reads them again, changed or not. Stat cannot see
//     everything that breaks a file: chmod 000 changes neither its
//     modification time nor its size, nor does a rewrite of the same
//     length within the same second, and only a read shows that the
//     process can no longer open it.
//   - Broken: a file that is missing, unreadable or does not parse is
//     broken, and a broken file yields no value at all: nothing read from
//     it before is kept. Credentials fail closed: a deleted token file
//     refuses every token instead of silently accepting the old ones. A
//     broken file is read again as soon as it changes, so a fix takes
//     effect on the next Get.
//
// The transition to broken is logged once, and so is the recovery;
// callers expose Err in their readiness probe and metrics.
package filereload

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Options configure a Reloader.
type Options struct {
	// Name identifies the files in logs, probes and metric labels, e.g.
	// "auth-tokens". It must not be secret.
	Name string
	// Logger gets one line when the files break and one when they load
	// again; nil discards.
	Logger *slog.Logger
	// Revalidate is the longest a value is used without reading the files
	// again (see the package doc); zero or less means DefaultRevalidate.
	// It bounds how long a file that has become unreadable is still
	// trusted.
	Revalidate time.Duration
}

// DefaultRevalidate is Options.Revalidate's default. A re-read every 10 s
// costs one open and read of a file of a few KiB, nothing next to the
// requests it guards, and 10 s is also the kubelet's default probe
// period: about the delay with which readiness follows a broken file
// anyway.
const DefaultRevalidate = 10 * time.Second

// Reloader holds a value parsed from one or more files and parses them
// again when any of them changes or the re-validation period has passed
// (see the package doc for the rules).
type Reloader[T any] struct {
	opts  Options
	paths []string
	parse func(contents [][]byte) (T, error)

	// now is time.Now and stat statAll; tests replace them.
	now  func() time.Time
	stat func(paths []string) ([]stamp, error)

	// watch tells Get when it may skip the stat (watch_linux.go); nil
	// when there is no inotify, and then Get stats every time.
	watch *watch

	mu     sync.Mutex
	stamps []stamp   // of the files as last read; nil until a read succeeded
	readAt time.Time // when they were last read
	statAt time.Time // when they were last stat'ed
	val    T
	err    error
	tried  bool
}

// restatEvery is the longest Get trusts the kernel's silence about the
// files: at least this often it stats them even when inotify reported no
// change, for the changes inotify cannot see (see "Changed").
const restatEvery = time.Second

// New returns a Reloader of paths; parse turns their contents, in the order
// of paths, into the value. parse's errors must not quote the contents.
// Nothing is read until the first Get.
func New[T any](opts Options, parse func(contents [][]byte) (T, error), paths ...string) *Reloader[T] {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Revalidate <= 0 {
		opts.Revalidate = DefaultRevalidate
	}
	r := &Reloader[T]{opts: opts, paths: paths, parse: parse, now: time.Now, stat: statAll}
	r.watch = newWatch(r)
	return r
}

// Error is why a Reloader's files are broken. Its message names them by
// Options.Name, as logs, probes and metrics do; a command line can name
// the flags that gave them instead, from Paths (cliflag.FileError).
type Error struct {
	// Name is Options.Name.
	Name string
	// Paths are all the Reloader's files, in its order.
	Paths []string
	// Op is "read" (a file cannot be read) or "load" (they do not parse).
	Op string
	// Err is the cause; it never quotes the files' contents.
	Err error
}

func (e *Error) Error() string { return "cannot " + e.Op + " " + e.Name + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Name is Options.Name.
func (r *Reloader[T]) Name() string { return r.opts.Name }

// Get returns the value as the files hold it now, or the reason they are
// broken. It costs a stat of each file, or on Linux, while the kernel
// reports no change to them, one read of an empty inotify queue; it reads
// the files only when one has changed or the re-validation period has
// passed, so it is cheap enough for every request.
func (r *Reloader[T]) Get() (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	fresh := now.Sub(r.readAt) < r.opts.Revalidate
	// A file broken because it is missing has no stamps, and is skipped
	// too: the watch is on the directory where it would appear.
	if fresh && r.tried && now.Sub(r.statAt) < restatEvery && r.watch.quiet() {
		return r.val, r.err
	}
	// Watch before the stat, and stat before reading: a file that changes
	// after either shows at the next Get, as an event or as a stamp newer
	// than the one recorded. Where the files are is resolved and watched
	// again only when they have changed (or the watch no longer covers
	// them): an event about another file of the same directory costs a
	// stat, as it did before there was a watch.
	rearmed := !r.watch.covers()
	if rearmed {
		r.watch.arm(r.paths)
	} else {
		r.watch.reset()
	}
	r.statAt = now
	stamps, err := r.stat(r.paths)
	if !rearmed && (err != nil || r.stamps == nil || !equalStamps(stamps, r.stamps)) {
		// Another file now, perhaps somewhere else, or still none but
		// perhaps a directory more on the way to it: watch it there, and
		// stat again after that.
		r.watch.arm(r.paths)
		stamps, err = r.stat(r.paths)
	}
	if err != nil {
		err = &Error{Name: r.opts.Name, Paths: r.paths, Op: "read", Err: err}
	}
	if err == nil && r.stamps != nil && equalStamps(stamps, r.stamps) && fresh {
		return r.val, r.err
	}
	var val T
	if err == nil {
		val, err = r.read()
	}
	r.record(stamps, val, err)
	r.readAt = now
	return r.val, r.err
}

// Err reports whether the files are broken now; nil means Get would return
// a value.
func (r *Reloader[T]) Err() error {
	_, err := r.Get()
	return err
}

func (r *Reloader[T]) read() (T, error) {
	var zero T
	contents := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return zero, &Error{Name: r.opts.Name, Paths: r.paths, Op: "read", Err: err}
		}
		contents[i] = b
	}
	v, err := r.parse(contents)
	if err != nil {
		return zero, &Error{Name: r.opts.Name, Paths: r.paths, Op: "load", Err: err}
	}
	return v, nil
}

// record keeps the outcome of a read and logs a change between working and
// broken. The first outcome is not logged: the caller decides whether a
// file broken at start is fatal, and says so itself.
func (r *Reloader[T]) record(stamps []stamp, val T, err error) {
	wasBroken, first := r.err != nil, !r.tried
	r.tried = true
	r.val, r.err = val, err
	// A failed stat has no stamps to compare: the next Get tries again.
	r.stamps = stamps
	switch {
	case first:
	case err != nil && !wasBroken:
		r.opts.Logger.Error("credentials file broken, refusing to use it", "file", r.opts.Name, "err", err)
	case err == nil && wasBroken:
		r.opts.Logger.Info("credentials file loaded again", "file", r.opts.Name)
	}
}

// stamp is what the "changed" rule compares.
type stamp struct {
	info os.FileInfo
	mod  time.Time
	size int64
}

func statAll(paths []string) ([]stamp, error) {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = stamp{info: fi, mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

func equalStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i].info, b[i].info) || !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// ErrEmpty is wrapped by the error of a token file that holds no token,
// so a caller for which the file is optional can tell it from a broken one.
var ErrEmpty = errors.New("file holds no token")
