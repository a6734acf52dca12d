//go:build !linux

package filereload

// watch is Linux's inotify (watch_linux.go); elsewhere there is none, and
// Get stats the files every time.
type watch struct{}

func newWatch[T any](*Reloader[T]) *watch { return nil }

func (*watch) quiet() bool  { return false }
func (*watch) covers() bool { return false }
func (*watch) reset()       {}
func (*watch) arm([]string) {}
