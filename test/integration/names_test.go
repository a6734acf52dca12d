package integration

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testShortNames checks, against the API server's own discovery with
// Metacontroller's CRDs installed, that the CRDs' short names are what the
// docs promise and that none of them is a name or short name of another
// resource (as "ds", "rc" and Metacontroller's "cc" would be), so kubectl
// never resolves them to something else.
func testShortNames(t *testing.T, c *controlplane.Client) {
	lists, err := c.Discovery()
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]string{} // name -> resource owning it
	got := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // a subresource
				continue
			}
			owner := r.Name + " (" + l.GroupVersion + ")"
			if l.GroupVersion == v1alpha1.APIVersion {
				got[r.Kind] = r.ShortNames
				if !contains(r.Categories, "formspec") {
					t.Errorf("%s: categories %v lack formspec", owner, r.Categories)
				}
				continue
			}
			for _, n := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
				taken[n] = owner
			}
		}
	}
	want := map[string][]string{
		"ClusterClass":  {"cclass"},
		"Workspace":     {"ws"},
		"Datastore":     {"dstore"},
		"ResourceClaim": {"rclaim"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formspec.dev short names: -want, +got:\n%s", diff)
	}
	kinds := make([]string, 0, len(got))
	for k := range got {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		for _, n := range got[kind] {
			if owner, ok := taken[n]; ok {
				t.Errorf("%s short name %q is already %s", kind, n, owner)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
