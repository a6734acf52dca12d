package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testFixtureChildren server-side dry-run creates every object a fixture
// says a hook returns (.children of composite responses, .attachments of
// decorator responses), each in its namespace (or the parent's), so that a
// golden file can never bless an object the API server would refuse.
//
// Fixtures live at fixtures/<controller>/<hook>/<case>/; there must be some.
func testFixtureChildren(t *testing.T, c *controlplane.Client) {
	root := controlplane.RepoRoot(t)
	dir := filepath.Join(root, "fixtures")
	responses, err := filepath.Glob(filepath.Join(dir, "*", "*", "*", "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(responses) == 0 {
		t.Fatal("no fixtures/<controller>/<hook>/<case>/response.json found")
	}
	for _, resp := range responses {
		caseDir := filepath.Dir(resp)
		rel, _ := filepath.Rel(dir, caseDir)
		t.Run(rel, func(t *testing.T) {
			objs, err := fixtureObjects(resp)
			if err != nil {
				t.Fatal(err)
			}
			parentNS := fixtureParentNamespace(t, filepath.Join(caseDir, "request.json"))
			for i, obj := range objs {
				md, _ := obj["metadata"].(map[string]any)
				if md == nil {
					md = map[string]any{}
					obj["metadata"] = md
				}
				ns, _ := md["namespace"].(string)
				if ns == "" {
					// Metacontroller puts children without a namespace in
					// the parent's.
					ns = parentNS
					md["namespace"] = ns
				}
				ensureNamespace(t, c, ns)
				if _, err := c.DryRunCreate(obj); err != nil {
					t.Errorf("object %d (%v %v): %v", i, obj["kind"], md["name"], err)
				}
			}
		})
	}
}

// fixtureObjects returns a response's children and attachments.
func fixtureObjects(path string) ([]controlplane.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Children    []controlplane.Object `json:"children"`
		Attachments []controlplane.Object `json:"attachments"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return append(resp.Children, resp.Attachments...), nil
}

// fixtureParentNamespace is the namespace of the request's parent
// (composite) or object (decorator), "default" when there is none.
func fixtureParentNamespace(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "default"
	}
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Parent struct {
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"parent"`
		Object struct {
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	switch {
	case req.Parent.Metadata.Namespace != "":
		return req.Parent.Metadata.Namespace
	case req.Object.Metadata.Namespace != "":
		return req.Object.Metadata.Namespace
	}
	return "default"
}
