package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAnswerLike checks that --answer-like answers with the hook server's
// objects for the parent at hand: the fixture's children and status, with
// only its workspace's name, namespace and generation changed.
func TestAnswerLike(t *testing.T) {
	fixture := filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", "first-sync", "response.json")
	like, err := readAnswer(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cl := classes{hpa: "elastic", like: &like}
	body := `{"parent":{"metadata":{"name":"ws-00042","namespace":"scale-04","generation":3},"spec":{"clusterClass":"elastic"}}}`
	out, err := cl.workspaceSync([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`"acme"`, `"acme-config"`, `"team-a"`} {
		if strings.Contains(string(out), old) {
			t.Errorf("the answer still names the fixture's workspace (%s): %s", old, out)
		}
	}

	type response struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
			Conditions         []struct {
				ObservedGeneration int64 `json:"observedGeneration"`
			} `json:"conditions"`
		} `json:"status"`
		Children []child `json:"children"`
	}
	var got, want response
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the answer is not JSON: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 3 || len(got.Status.Conditions) != len(want.Status.Conditions) {
		t.Errorf("status observes generation %d with %d conditions, want 3 with %d", got.Status.ObservedGeneration, len(got.Status.Conditions), len(want.Status.Conditions))
	}
	for i, c := range got.Status.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %d observes generation %d, want 3", i, c.ObservedGeneration)
		}
	}
	// The fixture's children, then the class's extra one.
	if len(got.Children) != len(want.Children)+1 || got.Children[len(got.Children)-1].Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("children %v, want the fixture's %d and a HorizontalPodAutoscaler", kinds(got.Children), len(want.Children))
	}
	for i, w := range want.Children {
		g := got.Children[i]
		if g.Kind != w.Kind || g.Metadata.Namespace != "scale-04" || !strings.HasPrefix(g.Metadata.Name, "ws-00042") {
			t.Errorf("child %d is %s %s/%s, want the fixture's %s for ws-00042 in scale-04", i, g.Kind, g.Metadata.Namespace, g.Metadata.Name, w.Kind)
		}
		// The spec is the fixture's, names aside: the same fields to apply.
		wantSpec := strings.NewReplacer(`"acme"`, `"ws-00042"`, `"acme-config"`, `"ws-00042-config"`, `"team-a"`, `"scale-04"`).Replace(string(w.Spec))
		if diff := cmp.Diff(decodeJSON(t, wantSpec), decodeJSON(t, string(g.Spec))); diff != "" {
			t.Errorf("%s spec differs from the fixture's (-fixture +answer):\n%s", g.Kind, diff)
		}
	}
}

// child is what TestAnswerLike reads of a child.
type child struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

func kinds(objs []child) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind)
	}
	return out
}

// decodeJSON decodes s, or is nil for an empty spec.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// TestAnswerLikeRefuses checks that an answer the trivial hook cannot make
// a template of is refused at start, with the file named.
func TestAnswerLikeRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not-json":      `{"status":`,
		"no-generation": `{"status":{"phase":"Ready"},"children":[{"kind":"Deployment","metadata":{"name":"a","namespace":"b"}}]}`,
		"no-deployment": `{"status":{"observedGeneration":1},"children":[{"kind":"Service","metadata":{"name":"a","namespace":"b"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readAnswer(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("readAnswer(%s) = %v, want an error naming the file", name, err)
			}
		})
	}
	if _, err := readAnswer(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}
