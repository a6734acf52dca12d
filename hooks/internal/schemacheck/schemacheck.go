// Package schemacheck validates objects against a CustomResourceDefinition's
// OpenAPI v3 schema. Tests use it on the controller YAML the project ships,
// so a misspelt field fails here instead of on a cluster. It covers the
// subset of the schema language those CRDs use: types, properties and
// unknown fields, required, enum, items, additionalProperties,
// x-kubernetes-preserve-unknown-fields and format: duration.
package schemacheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// SharedTestdata returns the path of a file in the shared test data that
// lives beside the repository (../shared/testdata), or in
// $FORMSPEC_SHARED/testdata when that is set. repoRoot is relative to the
// calling test's directory.
func SharedTestdata(repoRoot, name string) string {
	if dir := os.Getenv("FORMSPEC_SHARED"); dir != "" {
		return filepath.Join(dir, "testdata", name)
	}
	return filepath.Join(repoRoot, "..", "shared", "testdata", name)
}

// Documents splits a multi-document YAML file and converts each document
// to a JSON-shaped value.
func Documents(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("cannot decode YAML document: %w", err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out, nil
}

// CRDSchema returns the openAPIV3Schema of the named CRD version.
func CRDSchema(crds []byte, crdName, version string) (map[string]any, error) {
	docs, err := Documents(crds)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if lookup(d, "metadata", "name") != crdName {
			continue
		}
		versions, _ := lookup(d, "spec", "versions").([]any)
		for _, v := range versions {
			if lookup(v, "name") == version {
				if s, ok := lookup(v, "schema", "openAPIV3Schema").(map[string]any); ok {
					return s, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no schema for %s version %s", crdName, version)
}

// Validate returns one line per violation, sorted; none when obj conforms.
func Validate(schema map[string]any, obj any) []string {
	var errs []string
	validate(schema, obj, "", &errs)
	slices.Sort(errs)
	return errs
}

func validate(s map[string]any, v any, path string, errs *[]string) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Sprintf("%s: %s", or(path, "."), fmt.Sprintf(format, args...)))
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		fail("%v is not one of %v", v, enum)
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("want an object, got %T", v)
			return
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			if _, ok := m[fmt.Sprint(r)]; !ok {
				fail("missing required field %q", r)
			}
		}
		for k, child := range m {
			if ps, ok := props[k].(map[string]any); ok {
				validate(ps, child, path+"."+k, errs)
				continue
			}
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				validate(ap, child, path+"."+k, errs)
				continue
			}
			if s["x-kubernetes-preserve-unknown-fields"] == true || (props == nil && s["additionalProperties"] == nil) {
				continue
			}
			fail("unknown field %q", k)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("want an array, got %T", v)
			return
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range a {
				validate(items, e, fmt.Sprintf("%s[%d]", path, i), errs)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("want a string, got %T", v)
			return
		}
		if s["format"] == "duration" {
			if _, err := time.ParseDuration(str); err != nil {
				fail("%q is not a duration", str)
			}
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			fail("want an integer, got %v", v)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			fail("want a number, got %T", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("want a boolean, got %T", v)
		}
	}
}

func lookup(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}
