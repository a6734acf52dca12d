package controlplane

import "syscall"

// sysProcAttr puts a control-plane process in its own process group, so
// that stopping it stops everything it started, and has the kernel kill it
// if the test binary dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
