package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/internal/render"
)

func TestRender(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"render", "-f", "../../examples/workspace.yaml", "--resource-image", "example.com/resource", "--default-version", "1.8.2"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("render exited %d: %s", code, stderr.String())
	}
	type doc struct {
		Kind string `json:"kind"`
		Spec struct {
			Replicas    *int32 `json:"replicas"`
			MaxReplicas int32  `json:"maxReplicas"`
			Template    struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	}
	var kinds []string
	parts, err := render.SplitYAML(stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range parts {
		var d doc
		if err := yaml.Unmarshal(part, &d); err != nil {
			t.Fatalf("render printed invalid YAML: %v\n%s", err, part)
		}
		kinds = append(kinds, d.Kind)
		switch d.Kind {
		case "Deployment":
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("Deployment replicas: got %v, want 2 (the HPA's minimum, nothing observed yet)", d.Spec.Replicas)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != "example.com/resource:1.8.2" {
				t.Errorf("image: got %q, want example.com/resource:1.8.2", got)
			}
		case "HorizontalPodAutoscaler":
			if d.Spec.MaxReplicas != 6 {
				t.Errorf("HPA maxReplicas: got %d, want 6", d.Spec.MaxReplicas)
			}
		case "Workspace":
			if d.Status.Phase != "Pending" {
				t.Errorf("Workspace status.phase: got %q, want Pending", d.Status.Phase)
			}
		}
	}
	want := []string{"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Workspace"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("rendered kinds: -want, +got:\n%s", diff)
	}
}

// classYAML is a ClusterClass for the render tests.
const classYAML = "apiVersion: formspec.dev/v1alpha1\nkind: ClusterClass\nmetadata:\n  name: standard\nspec:\n  scaling:\n    minReplicas: 1\n"

func TestRenderErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		stdin  string
		want   string
	}{
		"NoWorkspace": {
			reason: "A ClusterClass alone renders nothing.",
			stdin:  "apiVersion: formspec.dev/v1alpha1\nkind: ClusterClass\nmetadata:\n  name: x\n",
			want:   "no Workspace in the input",
		},
		"OtherKind": {
			reason: "Objects of other groups are refused, not ignored.",
			stdin:  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			want:   "render reads Workspace, ClusterClass, ResourceClaim and Datastore",
		},
		"BadYAML": {
			reason: "Broken YAML names the document.",
			stdin:  "kind: [\n",
			want:   "document 1",
		},
		"TwoWorkspaces": {
			reason: "One Workspace at a time.",
			stdin:  "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: a\n---\napiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: b\n",
			want:   "more than one Workspace",
		},
		"UnknownField": {
			reason: "A typo in a field name is refused, naming the input, the document and the field, as the API server would refuse it.",
			stdin:  classYAML + "---\napiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: acme\nspec:\n  clusterClas: standard\n",
			want:   `stdin: document 2 (Workspace "acme"): unknown field "spec.clusterClas"`,
		},
		"TypeError": {
			reason: "A value of the wrong type names the field and the types in words.",
			stdin:  strings.Replace(classYAML, "minReplicas: 1", "minReplicas: two", 1),
			want:   `stdin: document 1 (ClusterClass "standard"): spec.scaling.minReplicas: want an integer, got a string`,
		},
		"QuantityError": {
			reason: "A value its own type decodes (a quantity) names its field too.",
			stdin:  "apiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: acme\nspec:\n  clusterClass: standard\n  resources:\n    limits:\n      memory: lots\n",
			want:   `stdin: document 1 (Workspace "acme"): spec.resources.limits.memory: quantities must match`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"render", "--default-version", "1.8.2"}, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%s\nrender: exit %d, stderr %q; want non-zero and %q", tc.reason, code, stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("%s\nrender printed %q on failure; want nothing", tc.reason, stdout.String())
			}
			for _, internal := range []string{"Go struct", "Go value", "json:", "int32", "formspec-hooks/hooks", "request"} {
				if strings.Contains(stderr.String(), internal) {
					t.Errorf("%s\nrender's error speaks of Go's internals (%q): %s", tc.reason, internal, stderr.String())
				}
			}
		})
	}
}

// TestRenderVersion checks that render asks for --default-version only
// when the Workspace has no spec.version, and only once the input is read:
// examples/workspace.yaml, which pins its version, renders as its "Try:"
// line says, and a missing file is reported as missing.
func TestRenderVersion(t *testing.T) {
	unpinned := classYAML + "---\napiVersion: formspec.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: acme\n  namespace: team-a\nspec:\n  clusterClass: standard\n"
	cases := map[string]struct {
		reason string
		args   []string
		stdin  string
		// code is the exit code; want is in stderr (or, for 0, the image in stdout).
		code int
		want string
	}{
		"ExampleTryLine": {
			reason: "The example's own Try: line, with no flags: its Workspace pins 1.8.2.",
			args:   tryLine(t, "../../examples/workspace.yaml"),
			want:   "image: formahub/formspec-resource:1.8.2",
		},
		"UnpinnedWithDefault": {
			reason: "A Workspace without spec.version takes --default-version.",
			args:   []string{"render", "--default-version", "2.0.0"},
			stdin:  unpinned,
			want:   "image: formahub/formspec-resource:2.0.0",
		},
		"UnpinnedWithTaggedImage": {
			reason: "Or the tag of --resource-image.",
			args:   []string{"render", "--resource-image", "example.com/resource:3.1"},
			stdin:  unpinned,
			want:   "image: example.com/resource:3.1",
		},
		"UnpinnedWithoutVersion": {
			reason: "A Workspace without spec.version and no version given is a usage error naming the flag and the Workspace.",
			args:   []string{"render"},
			stdin:  unpinned,
			code:   2,
			want:   "--default-version is required when --resource-image has no tag: Workspaces without spec.version need a version, and there is no implicit latest (Workspace team-a/acme has no spec.version)",
		},
		"MissingFileFirst": {
			reason: "A file that does not exist is reported as such, not as a missing version.",
			args:   []string{"render", "-f", "no-such-file.yaml"},
			code:   1,
			want:   "cannot read no-such-file.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("%s\nrender %q: exit %d, want %d; stderr: %s", tc.reason, tc.args, code, tc.code, stderr.String())
			}
			got := stderr.String()
			if code == 0 {
				got = stdout.String()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s\nrender %q: want %q in:\n%s", tc.reason, tc.args, tc.want, got)
			}
		})
	}
}

// tryLine returns the arguments of the "# Try: formspec-hooks ..." line of
// an example file, its paths made relative to this package.
func tryLine(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "# Try: formspec-hooks "); ok {
			args := strings.Fields(cmd)
			for i, a := range args {
				if strings.HasPrefix(a, "examples/") {
					args[i] = "../../" + a
				}
			}
			return args
		}
	}
	t.Fatalf("%s has no \"# Try: formspec-hooks\" line", file)
	return nil
}
