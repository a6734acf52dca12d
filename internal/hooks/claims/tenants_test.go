package claims_test

import (
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/claims"
)

func TestTenantAllowed(t *testing.T) {
	allowed := []string{"team-a/shop", "team-b/*", "bad entry/*"}
	cases := map[string]struct {
		reason        string
		ns, workspace string
		want          bool
	}{
		"Exact":          {reason: "namespace/workspace matches itself.", ns: "team-a", workspace: "shop", want: true},
		"OtherWorkspace": {reason: "Only the named workspace.", ns: "team-a", workspace: "blog"},
		"Wildcard":       {reason: "namespace/* matches every workspace there.", ns: "team-b", workspace: "anything", want: true},
		"Prefix":         {reason: "No prefix matching on namespaces.", ns: "team-bb", workspace: "shop"},
		"Malformed":      {reason: "A malformed entry matches nothing.", ns: "bad entry", workspace: "x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claims.TenantAllowed(allowed, tc.ns, tc.workspace); got != tc.want {
				t.Errorf("%s\nTenantAllowed(%s/%s) = %v, want %v", tc.reason, tc.ns, tc.workspace, got, tc.want)
			}
		})
	}
}
