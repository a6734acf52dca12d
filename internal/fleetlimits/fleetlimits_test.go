package fleetlimits

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/internal/memlimit"
	"github.com/google/go-cmp/cmp"
)

// defaults are the reporter's defaults without a memory limit.
var defaults = Limits{Workspaces: 10000, Tombstones: 5000, Claims: 20000, Pods: 100000}

func TestDerive(t *testing.T) {
	cases := map[string]struct {
		reason string
		// goLimit is GOMEMLIMIT as the runtime read it; cgroup the memory
		// controller's files, by path under /.
		goLimit    int64
		cgroup     map[string]string
		want       Limits
		wantSource string
	}{
		"Install": {reason: "The installs' 128 Mi limit, in the cgroup and in GOMEMLIMIT: a quarter kept, 96 MiB at 8 KiB a workspace.",
			goLimit: 128 << 20, cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "134217728\n"},
			want: Limits{Workspaces: 12288, Tombstones: 6144, Claims: 24576, Pods: 122880}, wantSource: memlimit.SourceCgroup},
		"CgroupV2Alone": {reason: "No GOMEMLIMIT: the cgroup v2 limit, 1 Gi.",
			goLimit: math.MaxInt64, cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"},
			want: ForWorkspaces(98304), wantSource: memlimit.SourceCgroup},
		"CgroupV1": {reason: "cgroup v1's memory.limit_in_bytes, 256 Mi.",
			goLimit: math.MaxInt64, cgroup: map[string]string{"proc/self/cgroup": "4:memory:/pod\n", "sys/fs/cgroup/memory/pod/memory.limit_in_bytes": "268435456\n"},
			want: ForWorkspaces(24576), wantSource: memlimit.SourceCgroup},
		"GOMEMLIMITAlone": {reason: "GOMEMLIMIT with no cgroup limit: 256 MiB.",
			goLimit: 256 << 20, cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"},
			want: ForWorkspaces(24576), wantSource: memlimit.SourceGOMEMLIMIT},
		"GOMEMLIMITBelowCgroup": {reason: "A GOMEMLIMIT below the cgroup's limit binds.",
			goLimit: 64 << 20, cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"},
			want: ForWorkspaces(4096), wantSource: memlimit.SourceGOMEMLIMIT},
		"Small": {reason: "Below 128 MiB the baseline is 32 MiB, not a quarter: 48 MiB leaves 16 MiB, 2048 workspaces.",
			goLimit: 48 << 20, want: ForWorkspaces(2048), wantSource: memlimit.SourceGOMEMLIMIT},
		"TooSmall": {reason: "A limit below the baseline still tracks the least number of workspaces, never none.",
			goLimit: 16 << 20, want: ForWorkspaces(MinWorkspaces), wantSource: memlimit.SourceGOMEMLIMIT},
		"NoLimitV2": {reason: "cgroup v2 \"max\" and no GOMEMLIMIT: the defaults.",
			goLimit: math.MaxInt64, cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"},
			want: defaults, wantSource: memlimit.SourceNone},
		"NoLimitV1": {reason: "cgroup v1's huge number and no GOMEMLIMIT: the defaults.",
			goLimit: math.MaxInt64, cgroup: map[string]string{"proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
			want: defaults, wantSource: memlimit.SourceNone},
		"NoCgroup": {reason: "Outside a container, no GOMEMLIMIT: the defaults.",
			goLimit: math.MaxInt64, want: defaults, wantSource: memlimit.SourceNone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for p, body := range tc.cgroup {
				f := filepath.Join(root, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			mem := memlimit.Of(tc.goLimit, memlimit.Cgroup(os.DirFS(root)))
			if diff := cmp.Diff(tc.wantSource, mem.Source); diff != "" {
				t.Errorf("%s\nsource: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, Derive(mem, defaults)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMemoryFor(t *testing.T) {
	cases := map[string]struct {
		reason string
		n      int
		want   int64
	}{
		"Small":   {reason: "Below 128 MiB: 32 MiB and 8 KiB a workspace.", n: 2048, want: 48 << 20},
		"Install": {reason: "128 MiB is the first limit whose baseline is a quarter.", n: 12288, want: 128 << 20},
		"Large":   {reason: "Beyond, four thirds of what the workspaces are charged.", n: 98304, want: 1 << 30},
		"Uneven":  {reason: "12,000 workspaces: 32 MiB and 12,000 times 8 KiB, 125.75 MiB.", n: 12000, want: 131858432},
		"Rounded": {reason: "Beyond 128 MiB rounded up to the byte: 4/3 of 20,000 times 8 KiB is 218,453,333.3.", n: 20000, want: 218453334},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MemoryFor(tc.n)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	// The inverse holds at every size, so a container sized with MemoryFor
	// tracks the fleet it was sized for.
	for n := MinWorkspaces; n <= 200000; n += 997 {
		if got := ForMemory(MemoryFor(n)).Workspaces; got != n {
			t.Fatalf("ForMemory(MemoryFor(%d)) = %d workspaces, want %d", n, got, n)
		}
	}
}
