// Package golden runs hook fixtures: fixtures/<hook>/<case>/request.json
// goes through a hook function and the answer is compared, as normalized
// JSON, with response.json. "go test ./... -update" rewrites the files the
// test can produce, and the diff is reviewed like code.
package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Update makes Run rewrite fixtures instead of comparing with them.
var Update = flag.Bool("update", false, "rewrite fixtures/<hook>/*/request.json (for built cases) and response.json")

// Serve answers one fixture request: name is the case directory, body the
// request.json bytes.
type Serve func(ctx context.Context, name string, body []byte) (any, error)

// Run checks every case directory under dir. Requests built in Go (built,
// by case name) are written to request.json under -update, so fixtures
// that need signatures are regenerated rather than edited by hand; a case
// directory with a hand-written request.json is run all the same.
func Run(t *testing.T, dir string, built map[string]any, serve Serve) {
	t.Helper()
	if *Update {
		for name, req := range built {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, name, "request.json"), req)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	for name := range built {
		if !slices.Contains(names, name) {
			t.Errorf("case %s has no fixture directory; run go test -update", name)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(dir, name, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			if req, ok := built[name]; ok && !*Update {
				if diff := cmp.Diff(normalize(t, marshal(t, req)), normalize(t, body)); diff != "" {
					t.Errorf("request.json differs from the case built in Go; run go test -update\n-want, +got:\n%s", diff)
				}
			}
			resp, err := serve(t.Context(), name, body)
			if err != nil {
				t.Fatalf("hook returned an error: %v", err)
			}
			respPath := filepath.Join(dir, name, "response.json")
			if *Update {
				write(t, respPath, resp)
				return
			}
			want, err := os.ReadFile(respPath)
			if errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s is missing; run go test -update", respPath)
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(t, want), normalize(t, marshal(t, resp))); diff != "" {
				t.Errorf("response: -want (%s), +got:\n%s", respPath, diff)
			}
		})
	}
}

// Decode reads a fixture body into a request type, rejecting unknown
// fields so a fixture cannot carry something the wire types drop.
func Decode[T any](body []byte) (*T, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	v := new(T)
	if err := dec.Decode(v); err != nil {
		return nil, err
	}
	return v, nil
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

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
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
