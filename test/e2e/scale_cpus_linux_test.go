//go:build linux

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// TestScale runs the hook server's fleet and the trivial hook's at the same
// time, each on a CPU of its own, so that whatever else the machine runs
// weighs on both alike (see scaleCPUs).

// usableCPUs lists the CPUs this process may run on.
func usableCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("cannot read this process's CPUs: %w", err)
	}
	var out []int
	for c := range 1024 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// pinProcesses keeps every thread of each process on cpu. Threads made
// later inherit the mask of the thread that makes them; a Go program
// sizes GOMAXPROCS to its mask again within a second or so (Go 1.25 on).
func pinProcesses(cpu int, pids ...int) error {
	var set unix.CPUSet
	set.Set(cpu)
	for _, pid := range pids {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("cannot pin thread %d of process %d: %w", tid, pid, err)
			}
		}
	}
	return nil
}

// processesMentioning finds the processes whose command line mentions
// dir: a control plane's etcd, kube-apiserver and kube-controller-manager
// all name files in its directory.
func processesMentioning(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			out = append(out, pid)
		}
	}
	return out, nil
}
