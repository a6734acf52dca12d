package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStartOn starts a child on the servers' CPUs and reads its mask back
// from /proc: the child, not only the thread that forked it, is placed.
func TestStartOn(t *testing.T) {
	driver, servers, desc, err := splitCPUs()
	if err != nil {
		t.Skipf("cannot split this machine's CPUs: %v", err)
	}
	if driver.Count() != 1 || servers.IsSet(firstCPU(driver)) || !strings.HasPrefix(desc, "driver on CPU ") {
		t.Fatalf("split %q: driver and servers overlap", desc)
	}
	var out bytes.Buffer
	cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := startOn(cmd, servers); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:"))
	if diff := cmp.Diff(cpuList(servers), expandList(t, got)); diff != "" {
		t.Errorf("child's CPUs (%s): -want, +got:\n%s", got, diff)
	}
}

// expandList reads a kernel CPU list such as "1", "1-3" or "0,2-3".
func expandList(t *testing.T, list string) []int {
	t.Helper()
	var out []int
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, found := strings.Cut(part, "-")
		if !found {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("cannot read CPU list %q", list)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

func firstCPU(s cpuSet) int {
	return cpuList(s)[0]
}
