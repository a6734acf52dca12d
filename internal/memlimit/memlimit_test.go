package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeRoot writes files, by path relative to the root, into a directory
// standing for /.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroup(t *testing.T) {
	cases := map[string]struct {
		reason string
		files  map[string]string
		want   int64
	}{
		"V2": {reason: "cgroup v2: the process's own cgroup's memory.max.", files: map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
		}, want: 256 << 20},
		"V2Namespaced": {reason: "cgroup v2 in a cgroup namespace, as in a pod: the root's memory.max.", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "134217728\n",
		}, want: 128 << 20},
		"V2NoLimit": {reason: "\"max\" is no limit.", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		"V1": {reason: "cgroup v1: the memory controller's path, whatever the other controllers say.", files: map[string]string{
			"proc/self/cgroup": "9:name=systemd:/\n4:memory:/formspec-test\n0::/\n",
			"sys/fs/cgroup/memory/formspec-test/memory.limit_in_bytes": "268435456",
		}, want: 256 << 20},
		"V1NoLimit": {reason: "v1 says no limit with a number near the largest int64.", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
		}},
		"NoLimitFile": {reason: "A cgroup without its limit file visible: no limit known.", files: map[string]string{
			"proc/self/cgroup": "0::/\n",
		}},
		"Garbage": {reason: "A limit file that is not a number: no limit known.", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}},
		"NoCgroup": {reason: "No /proc/self/cgroup: no limit known.", files: map[string]string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Cgroup(os.DirFS(fakeRoot(t, tc.files)))); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOf(t *testing.T) {
	cases := map[string]struct {
		reason               string
		goLimit, cgroupLimit int64
		want                 Limit
	}{
		"AsDeployed":      {reason: "GOMEMLIMIT set to the cgroup's limit, as the installs set it: the cgroup is named.", goLimit: 256 << 20, cgroupLimit: 256 << 20, want: Limit{256 << 20, SourceCgroup}},
		"CgroupAlone":     {reason: "The cgroup's limit alone.", goLimit: math.MaxInt64, cgroupLimit: 256 << 20, want: Limit{256 << 20, SourceCgroup}},
		"GOMEMLIMITAlone": {reason: "GOMEMLIMIT with no cgroup limit found is the container's limit too.", goLimit: 256 << 20, want: Limit{256 << 20, SourceGOMEMLIMIT}},
		"GOMEMLIMITAbove": {reason: "A GOMEMLIMIT above the cgroup's limit: the cgroup's binds.", goLimit: 1 << 30, cgroupLimit: 256 << 20, want: Limit{256 << 20, SourceCgroup}},
		"GOMEMLIMITBelow": {reason: "A GOMEMLIMIT below the cgroup's limit binds.", goLimit: 256 << 20, cgroupLimit: 1 << 30, want: Limit{256 << 20, SourceGOMEMLIMIT}},
		"NoLimit":         {reason: "Neither: no limit.", goLimit: math.MaxInt64, want: Limit{0, SourceNone}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.goLimit, tc.cgroupLimit)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
