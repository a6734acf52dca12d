package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuSet is a set of CPUs a process may run on; nil means wherever the
// operating system likes.
type cpuSet = *unix.CPUSet

// splitCPUs divides the CPUs this process may use between the driver (the
// first one) and the servers (the rest), so that no server is measured
// while the load it answers takes its CPU away. It describes the split for
// the report.
func splitCPUs() (driver, servers cpuSet, desc string, err error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, nil, "", fmt.Errorf("cannot read this process's CPUs: %w", err)
	}
	cpus := cpuList(&all)
	if len(cpus) < 2 {
		return nil, nil, "", errors.New("-cpus split needs at least 2 CPUs; use -cpus shared")
	}
	driver, servers = new(unix.CPUSet), new(unix.CPUSet)
	driver.Set(cpus[0])
	var names []string
	for _, c := range cpus[1:] {
		servers.Set(c)
		names = append(names, strconv.Itoa(c))
	}
	return driver, servers, fmt.Sprintf("driver on CPU %d, each server on CPU %s", cpus[0], strings.Join(names, ",")), nil
}

// cpuList lists the CPUs of s.
func cpuList(s cpuSet) []int {
	var out []int
	for c := range 1024 {
		if s.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// pinSelf keeps every thread of this process on set, and sizes GOMAXPROCS
// to it; threads made later inherit the mask of the thread that makes them.
func pinSelf(set cpuSet) error {
	runtime.GOMAXPROCS(set.Count())
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("cannot pin thread %d: %w", tid, err)
		}
	}
	return nil
}

// startOn starts cmd on set. A child inherits the CPU mask of the thread
// that forks it, and a Go server sizes GOMAXPROCS from that mask, so the
// fork happens on a thread of its own with the servers' mask; the thread
// ends with its goroutine (it stays locked), so nothing else runs there.
func startOn(cmd *exec.Cmd, set cpuSet) error {
	if set == nil {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.SchedSetaffinity(0, set); err != nil {
			errc <- fmt.Errorf("cannot set the servers' CPUs: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
