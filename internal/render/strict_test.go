package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestCheckDocument pins what render says of a document that its kind's
// type refuses: the field by its path, the types in words, never a value.
func TestCheckDocument(t *testing.T) {
	const secretValue = "hunter2-never-printed"
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"Valid": {
			reason: "A Workspace as the README writes it.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\nspec:\n  clusterClass: c\n  cache: {anything: [1, 2]}\n  pod:\n    tolerations: [{key: k, operator: Exists, tolerationSeconds: 30}]\n",
		},
		"UnknownSpecField": {
			reason: "A typo of a spec field.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\nspec:\n  clusterClas: c\n",
			want:   `unknown field "spec.clusterClas"`,
		},
		"UnknownFields": {
			reason: "Every unknown field, sorted, with list indexes.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\n  lables: {a: b}\nspec:\n  clusterClass: c\n  datastores: [{name: d, prefix: P_}]\n",
			want:   `unknown fields "metadata.lables", "spec.datastores[0].prefix"`,
		},
		"Integer": {
			reason: "minReplicas: two.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: ClusterClass\nmetadata:\n  name: c\nspec:\n  scaling: {minReplicas: two}\n",
			want:   "spec.scaling.minReplicas: want an integer, got a string",
		},
		"Fraction": {
			reason: "A number where an integer goes: the value is not quoted.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: ClusterClass\nmetadata:\n  name: c\nspec:\n  scaling: {maxReplicas: 2.5}\n",
			want:   "spec.scaling.maxReplicas: want an integer, got a number",
		},
		"List": {
			reason: "An object where a list goes.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: ClusterClass\nmetadata:\n  name: c\nspec:\n  features: auto-scaling\n",
			want:   "spec.features: want a list, got a string",
		},
		"ListItem": {
			reason: "A field of a list item is named with the item's index.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\nspec:\n  clusterClass: c\n  pod:\n    tolerations: [{key: k}, {key: k, tolerationSeconds: soon}]\n",
			want:   "spec.pod.tolerations[1].tolerationSeconds: want an integer, got a string",
		},
		"Time": {
			reason: "A value its own type decodes: the field is found all the same.",
			in:     "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\n  creationTimestamp: yesterday\nspec:\n  clusterClass: c\n",
			want:   `metadata.creationTimestamp: parsing time "yesterday"`,
		},
		"SecretValue": {
			reason: "A Secret's value of the wrong type is named by its key, and never shown.",
			in:     "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: {value: " + secretValue + "}\n",
			want:   "stringData.password: want a string, got an object",
		},
		"SecretData": {
			reason: "data that is not base64 is named by its key, and never shown.",
			in:     "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  password: " + secretValue + "\n",
			want:   "data.password: illegal base64 data",
		},
		"OtherKind": {
			reason: "A kind render does not read is readInput's to refuse.",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\nbogus: 1\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j, err := yaml.YAMLToJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var head objectHead
			if err := yaml.Unmarshal([]byte(tc.in), &head); err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := checkDocument(head.APIVersion+" "+head.Kind, j); err != nil {
				got = err.Error()
			}
			if tc.want == "" || !strings.HasPrefix(got, tc.want) {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s\ncheckDocument(): -want (a prefix), +got:\n%s", tc.reason, diff)
				}
			}
			if strings.Contains(got, secretValue) {
				t.Errorf("%s\ncheckDocument() quotes a Secret's value: %s", tc.reason, got)
			}
		})
	}
}
