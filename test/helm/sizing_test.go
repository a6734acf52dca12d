package helm

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/fleetlimits"
	"github.com/google/go-cmp/cmp"
)

// TestExpectedWorkspacesSizing checks that reporter.expectedWorkspaces
// gives the reporter the least whole-MiB memory limit from which the
// reporter itself derives at least that many workspaces
// (fleetlimits.ForMemory), so the chart and the binary cannot drift.
func TestExpectedWorkspacesSizing(t *testing.T) {
	for _, n := range []int{1001, 5000, 10000, 12287, 12288, 12289, 20000, 50000, 100000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dep := deploymentOf(t, render(t, valueRelease(required+fmt.Sprintf("reporter: {expectedWorkspaces: %d}", n))).objects)
			limit, _ := pick(dep, "spec.template.spec.containers[reporter].resources.limits.memory").(string)
			mi, err := strconv.ParseInt(strings.TrimSuffix(limit, "Mi"), 10, 64)
			if err != nil || !strings.HasSuffix(limit, "Mi") {
				t.Fatalf("reporter memory limit %q, want <n>Mi", limit)
			}
			if got := fleetlimits.ForMemory(mi << 20).Workspaces; got < n {
				t.Errorf("%s derives %d workspaces, fewer than the %d expected", limit, got, n)
			}
			if got := fleetlimits.ForMemory((mi - 1) << 20).Workspaces; got >= n {
				t.Errorf("%dMi would do (%d workspaces): %s is more than %d need", mi-1, got, limit, n)
			}
			// The request and the rest of resources stay as written.
			if diff := cmp.Diff(map[string]any{"cpu": "50m", "memory": "32Mi"}, pick(dep, "spec.template.spec.containers[reporter].resources.requests")); diff != "" {
				t.Errorf("requests, -want, +got:\n%s", diff)
			}
		})
	}
}
