//go:build !linux

package e2e

import "errors"

// Elsewhere than Linux TestScale runs its two fleets one after the other
// on every CPU.

func usableCPUs() ([]int, error) { return nil, errors.New("CPU affinity needs Linux") }

func pinProcesses(int, ...int) error { return errors.New("CPU affinity needs Linux") }

func processesMentioning(string) ([]int, error) { return nil, errors.New("needs Linux's /proc") }
