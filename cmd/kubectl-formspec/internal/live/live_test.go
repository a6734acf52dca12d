package live

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestChildResources keeps ChildResources the childResources of the
// workspace CompositeController: a kind the controller gains and the
// plugin does not list would be missing from every trace and diff.
func TestChildResources(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "compositecontrollers", "workspace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Spec struct {
			ChildResources []struct {
				APIVersion string `json:"apiVersion"`
				Resource   string `json:"resource"`
			} `json:"childResources"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &cc); err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, c := range cc.Spec.ChildResources {
		want = append(want, c.APIVersion+" "+c.Resource)
	}
	for _, c := range ChildResources {
		got = append(got, c.APIVersion()+" "+c.Resource.Resource)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ChildResources against compositecontrollers/workspace.yaml: -want, +got:\n%s", diff)
	}
}
