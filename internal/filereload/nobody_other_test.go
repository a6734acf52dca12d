//go:build !linux

package filereload

import (
	"os"
	"testing"
)

// unprivileged reports whether file permissions apply to this process;
// dropping root for a child process is done on Linux only.
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("running as root, where chmod 000 stops no read; dropping privileges for a child is implemented on Linux only")
	}
	return true
}
