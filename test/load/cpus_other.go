//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// cpuSet is a set of CPUs; placing processes on CPUs is only done on Linux.
type cpuSet = *struct{}

func splitCPUs() (driver, servers cpuSet, desc string, err error) {
	return nil, nil, "", errors.New("-cpus split needs Linux; use -cpus shared")
}

func pinSelf(cpuSet) error { return nil }

func startOn(cmd *exec.Cmd, _ cpuSet) error { return cmd.Start() }
