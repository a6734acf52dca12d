package integration

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestCRDFiles checks what the API server does not: that the kustomization
// lists every CRD, that each CRD has the names, categories, subresources
// and printer columns kubectl shows, and that every field has a
// description, so that "kubectl explain" is useful all the way down.
func TestCRDFiles(t *testing.T) {
	root := controlplane.RepoRoot(t)
	files := crdFiles(t)

	t.Run("Kustomization", func(t *testing.T) {
		docs, err := controlplane.ReadYAMLFile(filepath.Join(root, "deploy", "crds", "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, r := range docs[0]["resources"].([]any) {
			listed = append(listed, r.(string))
		}
		var want []string
		for _, f := range files {
			want = append(want, filepath.Base(f))
		}
		sort.Strings(listed)
		if diff := cmp.Diff(want, listed); diff != "" {
			t.Errorf("deploy/crds/kustomization.yaml resources: -want, +got:\n%s", diff)
		}
	})

	type crdShape struct {
		Scope      string
		ShortNames []string
		Categories []string
		Status     bool
		Age        bool
	}
	want := map[string]crdShape{
		"clusterclasses.formspec.dev": {Scope: "Cluster", ShortNames: []string{"cclass"}, Categories: []string{"formspec"}, Status: false, Age: true},
		"workspaces.formspec.dev":     {Scope: "Namespaced", ShortNames: []string{"ws"}, Categories: []string{"formspec"}, Status: true, Age: true},
		"datastores.formspec.dev":     {Scope: "Namespaced", ShortNames: []string{"dstore"}, Categories: []string{"formspec"}, Status: true, Age: true},
		"resourceclaims.formspec.dev": {Scope: "Namespaced", ShortNames: []string{"rclaim"}, Categories: []string{"formspec"}, Status: true, Age: true},
	}
	got := map[string]crdShape{}
	for _, f := range files {
		docs, err := controlplane.ReadYAMLFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, crd := range docs {
			name := crd["metadata"].(map[string]any)["name"].(string)
			// kubectl apply -k deploy/ (client-side) keeps each object's
			// JSON in an annotation, and annotations are capped at 256 KiB:
			// the generated core schemas must leave a CRD below that.
			t.Run(name+"/FitsClientSideApply", func(t *testing.T) {
				data, err := json.Marshal(crd)
				if err != nil {
					t.Fatal(err)
				}
				last := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(data)}
				if err := apivalidation.ValidateAnnotationsSize(last); err != nil {
					t.Errorf("kubectl apply could not record %s (%d bytes of JSON): %v", name, len(data), err)
				}
			})
			spec := crd["spec"].(map[string]any)
			names := spec["names"].(map[string]any)
			shape := crdShape{Scope: spec["scope"].(string)}
			for _, s := range names["shortNames"].([]any) {
				shape.ShortNames = append(shape.ShortNames, s.(string))
			}
			for _, s := range names["categories"].([]any) {
				shape.Categories = append(shape.Categories, s.(string))
			}
			for _, v := range spec["versions"].([]any) {
				v := v.(map[string]any)
				sub, _ := v["subresources"].(map[string]any)
				_, shape.Status = sub["status"]
				cols, _ := v["additionalPrinterColumns"].([]any)
				for _, c := range cols {
					if c.(map[string]any)["jsonPath"] == ".metadata.creationTimestamp" {
						shape.Age = true
					}
				}
				schema := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
				t.Run(name+"/"+v["name"].(string)+"/Descriptions", func(t *testing.T) {
					for _, path := range undescribed(schema, "") {
						t.Errorf("field %s has no description", path)
					}
				})
			}
			got[name] = shape
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD names, subresources and columns: -want, +got:\n%s", diff)
	}
}

// undescribed returns the paths of the properties under schema that have
// no description. metadata, described by the API server, is exempt.
func undescribed(schema map[string]any, path string) []string {
	var missing []string
	if props, ok := schema["properties"].(map[string]any); ok {
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := props[k].(map[string]any)
			child := path + "." + k
			if path == "" && k == "metadata" {
				continue
			}
			if d, _ := p["description"].(string); d == "" {
				missing = append(missing, child)
			}
			missing = append(missing, undescribed(p, child)...)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		missing = append(missing, undescribed(items, path+"[]")...)
	}
	if ap, ok := schema["additionalProperties"].(map[string]any); ok {
		missing = append(missing, undescribed(ap, path+"{}")...)
	}
	return missing
}
