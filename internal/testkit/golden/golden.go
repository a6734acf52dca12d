// Package golden keeps the fixture requests that are built in Go (signed
// claims cannot be written by hand) in step with
// fixtures/<controller>/<hook>/<case>/request.json. The responses are not
// checked here: cmd/formspec-hooks TestFixtures posts every request through
// the real HTTP handler and compares the answer with response.json, the one
// place that does so. "go test ./... -update" rewrites what each produces,
// and the diff is reviewed like code.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Update makes Requests rewrite request.json instead of comparing with it.
var Update = flag.Bool("update", false, "rewrite fixtures/<controller>/<hook>/*/request.json for the cases built in Go")

// Requests checks that every request built in Go (by case name) is the
// request.json of its case directory under dir (fixtures/<controller>/<hook>),
// or writes it there under -update.
func Requests(t *testing.T, dir string, built map[string]any) {
	t.Helper()
	for name, req := range built {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name, "request.json")
			if *Update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, path, req)
				return
			}
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v; run go test -update", err)
			}
			if diff := cmp.Diff(normalize(t, marshal(t, req)), normalize(t, body)); diff != "" {
				t.Errorf("request.json differs from the case built in Go; run go test -update\n-want, +got:\n%s", diff)
			}
		})
	}
}

// YAMLToJSON converts a YAML file to JSON, for embedding the controller
// objects of compositecontrollers/ in requests.
func YAMLToJSON(t *testing.T, path string) json.RawMessage {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// marshal writes indented JSON without escaping <>&, as the server does.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.WriteFile(path, marshal(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func normalize(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	return v
}
