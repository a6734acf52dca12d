package diff

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFields(t *testing.T) {
	cases := map[string]struct {
		reason        string
		live, desired string
		want          []Field
	}{
		"Same": {
			reason: "Equal objects differ in nothing.",
			live:   `{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"a","image":"x"}]}}}}`, desired: `{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"a","image":"x"}]}}}}`,
		},
		"Scalar": {
			reason: "A changed number, with both values.",
			live:   `{"spec":{"maxReplicas":4}}`, desired: `{"spec":{"maxReplicas":6}}`,
			want: []Field{{Path: "spec.maxReplicas", Live: "4", Desired: "6"}},
		},
		"AddedAndRemoved": {
			reason: "A field on one side only is (none) on the other; objects and lists are shown as such.",
			live:   `{"data":{"A":"1"},"spec":{"old":[1]}}`, desired: `{"data":{"A":"1","B":"2"},"spec":{"new":{"x":1}}}`,
			want: []Field{{Path: "data.B", Live: "(none)", Desired: `"2"`}, {Path: "spec.new", Live: "(none)", Desired: "{…}"}, {Path: "spec.old", Live: "[…]", Desired: "(none)"}},
		},
		"NamedList": {
			reason:  "Containers and env are matched by name, whatever their order.",
			live:    `{"containers":[{"name":"side","image":"s:1"},{"name":"resource","image":"r:1","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}]}`,
			desired: `{"containers":[{"name":"resource","image":"r:2","env":[{"name":"B","value":"2"},{"name":"A","value":"1"}]},{"name":"side","image":"s:1"}]}`,
			want:    []Field{{Path: "containers[resource].image", Live: `"r:1"`, Desired: `"r:2"`}},
		},
		"UnnamedList": {
			reason: "Other lists are compared by position.",
			live:   `{"args":["a","b"]}`, desired: `{"args":["a","c","d"]}`,
			want: []Field{{Path: "args[1]", Live: `"b"`, Desired: `"c"`}, {Path: "args[2]", Live: "(none)", Desired: `"d"`}},
		},
		"Key": {
			reason: "A key that is not an identifier is written in brackets.",
			live:   `{"metadata":{"annotations":{"formspec.dev/config-hash":"a"}}}`, desired: `{"metadata":{"annotations":{"formspec.dev/config-hash":"b"}}}`,
			want: []Field{{Path: "metadata.annotations[formspec.dev/config-hash]", Live: `"a"`, Desired: `"b"`}},
		},
		"Long": {
			reason: "Long values are cut short.",
			live:   `{"data":{"X":"` + strings.Repeat("a", 100) + `"}}`, desired: `{"data":{}}`,
			want: []Field{{Path: "data.X", Live: `"` + strings.Repeat("a", 58) + "…", Desired: "(none)"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var live, desired any
			if err := json.Unmarshal([]byte(tc.live), &live); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.desired), &desired); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, Fields(live, desired)); diff != "" {
				t.Errorf("%s\nFields: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRolls(t *testing.T) {
	cases := map[string]struct {
		reason string
		fields []Field
		want   bool
	}{
		"Template":  {reason: "A pod template field rolls the pods.", fields: []Field{{Path: "spec.template.spec.containers[resource].image"}}, want: true},
		"Replicas":  {reason: "The replica count does not.", fields: []Field{{Path: "spec.replicas"}}, want: false},
		"Metadata":  {reason: "Nor do the Deployment's own labels.", fields: []Field{{Path: "metadata.labels[team]"}}, want: false},
		"Lookalike": {reason: "A field that only starts like template does not.", fields: []Field{{Path: "spec.templateHash"}}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := rolls(tc.fields); got != tc.want {
				t.Errorf("%s\nrolls: got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	results := []Result{
		{Namespace: "team-a", Name: "api", Outcome: Changed, Children: []Child{
			{Kind: "HorizontalPodAutoscaler", Name: "api", Action: Update, Fields: []Field{{Path: "spec.maxReplicas", Live: "4", Desired: "6"}}},
			{Kind: "PodDisruptionBudget", Name: "api", Action: Delete},
		}},
		{Namespace: "team-a", Name: "gone", Outcome: Terminating},
		{Namespace: "team-b", Name: "broken", Outcome: Failed, Error: "dry-run apply of Deployment broken: forbidden"},
		{Namespace: "team-b", Name: "web", Outcome: Unchanged},
	}
	want := `WORKSPACE       RESULT
team-a/api      changed
  HorizontalPodAutoscaler/api: would change
    spec.maxReplicas: 4 → 6
  PodDisruptionBudget/api: would be deleted
team-a/gone     terminating (not compared: its finalize hook decides)
team-b/broken   error: dry-run apply of Deployment broken: forbidden
team-b/web      unchanged

4 workspaces: 1 unchanged, 1 changed, 1 terminating, 1 error
`
	var b strings.Builder
	if err := Print(&b, results); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Print: -want, +got:\n%s", diff)
	}
}
