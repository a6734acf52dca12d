package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/fleetlimits"
	"github.com/formspec/formspec-hooks/internal/memlimit"
	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/google/go-cmp/cmp"
)

// TestLimitsBinary starts the reporter binary under a GOMEMLIMIT with one
// bound given by its flag: the bounds no flag sets are derived from the
// limit, the flag wins for its own, --max-nodes keeps its default, and
// formspec_reporter_limit and the one log line at start say which is
// which.
func TestLimitsBinary(t *testing.T) {
	// 64 MiB: 4096 workspaces, unless this machine's memory cgroup is
	// tighter still, which then binds (and is named).
	t.Setenv("GOMEMLIMIT", "64MiB")
	mem := memlimit.Of(64<<20, memlimit.Cgroup(os.DirFS("/")))
	derived := fleetlimits.ForMemory(mem.Bytes)
	metrics, logPath := startReporter(t, startProxy(t), "--cluster-control-url", "http://"+closedPort(t), "--max-claims=777")
	body, err := scrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^formspec_reporter_limit\{bound="(\w+)",source="(\w+)"\} (\S+)$`).FindAllStringSubmatch(body, -1) {
		got[m[1]] = m[2] + " " + m[3]
	}
	want := map[string]string{
		"workspaces": fmt.Sprint(mem.Source, " ", derived.Workspaces),
		"tombstones": fmt.Sprint(mem.Source, " ", derived.Tombstones),
		"pods":       fmt.Sprint(mem.Source, " ", derived.Pods),
		"claims":     "flag 777",
		"nodes":      "default 5000",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formspec_reporter_limit by bound, source and value, -want, +got:\n%s", diff)
	}
	var line string
	for l := range strings.Lines(readLog(t, logPath)) {
		if strings.Contains(l, "reporter limits") {
			line = l
		}
	}
	for _, attr := range []string{fmt.Sprint("memoryLimit=", mem.Bytes), "memorySource=" + mem.Source, fmt.Sprint("workspaces=", derived.Workspaces), "claims=777", "fromFlags=[claims]"} {
		if !strings.Contains(line, attr) {
			t.Errorf("the start's limits line does not say %s:\n%s", attr, line)
		}
	}
}

func TestSetLimits(t *testing.T) {
	cases := map[string]struct {
		reason string
		mem    memlimit.Limit
		// flags holds the --max-* values given, 0 for none.
		flags reporter.Config
		want  []bound
	}{
		"NoLimit": {reason: "No memory limit and no flag: today's defaults.", mem: memlimit.Of(math.MaxInt64, 0),
			want: []bound{{"workspaces", 10000, "default"}, {"tombstones", 5000, "default"}, {"claims", 20000, "default"}, {"pods", 100000, "default"}, {"nodes", 5000, "default"}}},
		"Derived": {reason: "The installs' 128 Mi: every fleet bound derived, nodes at their default.", mem: memlimit.Of(128<<20, 128<<20),
			want: []bound{{"workspaces", 12288, "cgroup"}, {"tombstones", 6144, "cgroup"}, {"claims", 24576, "cgroup"}, {"pods", 122880, "cgroup"}, {"nodes", 5000, "default"}}},
		"FlagWins": {reason: "A flag wins for its bound only, above or below what the limit gives.", mem: memlimit.Of(256<<20, 0),
			flags: reporter.Config{MaxWorkspaces: 50000, MaxNodes: 100},
			want:  []bound{{"workspaces", 50000, "flag"}, {"tombstones", 12288, "GOMEMLIMIT"}, {"claims", 49152, "GOMEMLIMIT"}, {"pods", 245760, "GOMEMLIMIT"}, {"nodes", 100, "flag"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tc.flags
			got := setLimits(&cfg, tc.mem)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(bound{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			set := []int{cfg.MaxWorkspaces, cfg.MaxTombstones, cfg.MaxClaims, cfg.MaxPods, cfg.MaxNodes}
			for i, b := range tc.want {
				if set[i] != b.value {
					t.Errorf("%s\nthe config's %s is %d, want %d", tc.reason, b.name, set[i], b.value)
				}
			}
		})
	}
}
