package node

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCIInstallsPrerequisites keeps the three lists of what the cluster
// needs in step: the packages Prerequisites names, the packages .ci/run
// installs on a fresh machine, and the table in docs/testing.md. A program
// added to hostBinaries without its package in .ci/run passes on a machine
// where someone installed it by hand and fails on a fresh one, which is
// how nft went missing once.
func TestCIInstallsPrerequisites(t *testing.T) {
	root := filepath.Join("..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*for p in ([a-z0-9 .+-]+); do`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(`.ci/run: no "for p in PACKAGES; do" loop found; is the install step still there?`)
	}
	installed := strings.Fields(string(m[1]))

	needed := slices.Compact(slices.Sorted(maps.Values(hostBinaries)))
	needed = append(needed, "containernetworking-plugins")
	docs, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range needed {
		if !slices.Contains(installed, pkg) {
			t.Errorf(".ci/run does not install %s, which test/node needs; add it to its package loop", pkg)
		}
		if !strings.Contains(string(docs), "Debian `"+pkg+"`") {
			t.Errorf("docs/testing.md does not list Debian `%s` under \"Programs the tests run\"", pkg)
		}
	}
}

// TestPrerequisitesNameThePackage checks that a missing program is
// reported with the Debian package that provides it, on one line.
func TestPrerequisitesNameThePackage(t *testing.T) {
	bin := t.TempDir()
	for _, name := range nodeBinaries {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBinDir, bin)
	// A PATH with nothing on it: the first host program in sorted order
	// is reported.
	t.Setenv("PATH", t.TempDir())
	first := slices.Sorted(maps.Keys(hostBinaries))[0]
	err := Prerequisites()
	if err == nil {
		t.Fatal("Prerequisites: no error with an empty PATH")
	}
	want := first + " not found: apt-get install " + hostBinaries[first] + " "
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Prerequisites() = %q, want one line starting %q", err, want)
	}

	// A node binary that was never built names the make target.
	if err := os.Remove(filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	err = Prerequisites()
	if err == nil || !strings.Contains(err.Error(), "has no kubectl: build the node binaries with make node-binaries") {
		t.Errorf("Prerequisites() with no kubectl = %v, want it to name kubectl and make node-binaries", err)
	}
}
