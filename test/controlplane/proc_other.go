//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a control-plane process in its own process group, so
// that stopping it stops everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
