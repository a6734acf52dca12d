package filereload

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// This file lets a Get skip its stat while the kernel reports no change to
// the files (see "Changed" in the package doc). Linux's inotify queues an
// event before the write, rename or removal that causes it returns, so a
// change made before a request is in the queue by the time that request's
// Get reads it; a Get that finds the queue empty has nothing a stat would
// have shown, except what inotify does not see (a directory further up
// renamed, a change made on another machine of a network file system),
// which the stat at least once a second still catches.
//
// One inotify instance serves every Reloader of the process: the kernel
// allows each user only a few (128 by default, shared with every other
// process of that user on the node), and a test binary makes hundreds of
// Reloaders. When there is none to be had, Get stats every time, as it
// would anyway.

// watchMask is every event that can mean one of the files changed: in a
// watched directory, an entry created, removed, renamed or rewritten (a
// symlink swapped, a file replaced or deleted); on the file itself, a
// write, a mode change, its removal or its move.
const watchMask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE | syscall.IN_ATTRIB | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF |
	syscall.IN_DONT_FOLLOW | syscall.IN_EXCL_UNLINK

// inotify is the process's one instance. fd is -1 when there is none.
var inotify struct {
	once sync.Once
	mu   sync.Mutex
	fd   int
	// owners are the watches that asked for each watch descriptor: the
	// same directory or file may be watched for several Reloaders, and the
	// kernel gives it one descriptor.
	owners map[int32]map[*flags]bool
	buf    [4096]byte
}

func inotifyFD() int {
	inotify.once.Do(func() {
		fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
		if err != nil {
			fd = -1
		}
		inotify.fd = fd
		inotify.owners = map[int32]map[*flags]bool{}
	})
	return inotify.fd
}

// watch is one Reloader's share of the instance.
type watch struct {
	// flags are the watch's key in inotify.owners, so that the Reloader
	// itself is not kept alive by the instance.
	flags *flags
	wds   map[int32]bool
	armed bool
}

// flags are what drain tells a watch: changed when an event arrived on
// one of its descriptors, lost when the kernel dropped one (its file or
// directory went), so that the watch no longer covers what it did.
type flags struct{ changed, lost atomic.Bool }

// newWatch returns the watch of a new Reloader r, or nil when the process
// has no inotify instance. Its descriptors are given up when r is
// collected.
func newWatch[T any](r *Reloader[T]) *watch {
	if inotifyFD() < 0 {
		return nil
	}
	w := &watch{flags: new(flags), wds: map[int32]bool{}}
	runtime.AddCleanup(r, func(f *flags) {
		inotify.mu.Lock()
		defer inotify.mu.Unlock()
		for wd, owners := range inotify.owners {
			if owners[f] {
				release(wd, f)
			}
		}
	}, w.flags)
	return w
}

// covers reports whether the watch is armed and still has every
// descriptor it was armed with.
func (w *watch) covers() bool { return w != nil && w.armed && !w.flags.lost.Load() }

// quiet reports whether the watch is armed and no event has arrived for it
// since it was last armed. Called with the Reloader's lock held.
func (w *watch) quiet() bool {
	if !w.covers() {
		return false
	}
	inotify.mu.Lock()
	drain()
	inotify.mu.Unlock()
	return !w.flags.changed.Load()
}

// reset forgets the events that have arrived, for a Get that is about to
// stat the files anyway. Called with the Reloader's lock held.
func (w *watch) reset() {
	if w == nil {
		return
	}
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	drain()
	w.flags.changed.Store(false)
}

// arm watches paths anew (Get does when the watch does not cover them, or
// the files have changed): each directory in which a name on the way to a
// file is looked up (its own directory, and the directory of every
// symlink followed), and the file itself. The kubelet updates a mounted
// Secret by swapping a symlink in the volume's directory, so that swap is
// seen. Events that arrive from here on count; the caller stats the files
// after arming, so no change can fall between the two. A name on the way
// that does not exist is watched for in the directory it would appear in,
// so that a missing file (a Secret without the key yet) costs its Gets no
// stat until something is created there. A path that cannot be resolved
// otherwise leaves the watch unarmed, and Get stats every time until a
// later arm succeeds. Called with the Reloader's lock held.
func (w *watch) arm(paths []string) {
	if w == nil {
		return
	}
	// An event between the reset and the watches added below only makes
	// the next Get stat again.
	w.reset()
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	w.flags.lost.Store(false)
	want := map[int32]bool{}
	ok := true
	for _, p := range paths {
		names, err := lookedUp(p)
		if err != nil {
			ok = false
			break
		}
		for _, name := range names {
			wd, err := syscall.InotifyAddWatch(inotify.fd, name, watchMask)
			if err != nil {
				ok = false
				break
			}
			want[int32(wd)] = true
		}
	}
	for wd := range want {
		if inotify.owners[wd] == nil {
			inotify.owners[wd] = map[*flags]bool{}
		}
		inotify.owners[wd][w.flags] = true
	}
	for wd := range w.wds {
		if !want[wd] {
			release(wd, w.flags)
		}
	}
	w.wds, w.armed = want, ok
}

// release gives up f's share of wd, and the descriptor itself when no
// watch has a share left. Called with inotify.mu held.
func release(wd int32, f *flags) {
	delete(inotify.owners[wd], f)
	if len(inotify.owners[wd]) == 0 {
		delete(inotify.owners, wd)
		// The kernel answers with an IN_IGNORED event, which drain skips;
		// it may also have dropped the descriptor already, with its file.
		_, _ = syscall.InotifyRmWatch(inotify.fd, uint32(wd))
	}
}

// drain reads every queued event and marks the watches it concerns; an
// overflowed queue, or a read that fails, marks every watch. Called with
// inotify.mu held.
func drain() {
	for {
		n, err := syscall.Read(inotify.fd, inotify.buf[:])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			if err != nil && err != syscall.EAGAIN {
				markAll()
			}
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&inotify.buf[off]))
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&syscall.IN_Q_OVERFLOW != 0:
				markAll()
			case ev.Mask&syscall.IN_IGNORED != 0:
				// A descriptor went away: its file or directory is gone
				// (a descriptor released has no owners left to tell).
				for f := range inotify.owners[ev.Wd] {
					f.changed.Store(true)
					f.lost.Store(true)
				}
				delete(inotify.owners, ev.Wd)
			default:
				for f := range inotify.owners[ev.Wd] {
					f.changed.Store(true)
				}
			}
		}
	}
}

func markAll() {
	for _, owners := range inotify.owners {
		for f := range owners {
			f.changed.Store(true)
		}
	}
}

// lookedUp resolves path one name at a time, as the kernel does, and
// returns where a change of the file can show: the directory of every
// symlink followed on the way (the kubelet's ..data swap shows in the
// volume's directory), the directory the file's own name is in, and the
// file. All of them are symlink-free, so they are watched as they are. A
// directory further up is not among them: renaming one is seen by the
// stat at least once a second (see the file comment). When a name on the
// way does not exist, the list ends with the directory it is missing from,
// where its creation shows.
func lookedUp(path string) ([]string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	var names []string
	rest, cur, links := components(path), "/", 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return append(names, cur), nil
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		// 40 is the kernel's own limit of symlinks in one lookup.
		if links++; links > 40 {
			return nil, syscall.ELOOP
		}
		names = append(names, cur)
		target, err := os.Readlink(next)
		if err != nil {
			return nil, err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(components(target), rest...)
	}
	return append(names, filepath.Dir(cur), cur), nil
}

func components(path string) []string { return strings.Split(path, "/") }
