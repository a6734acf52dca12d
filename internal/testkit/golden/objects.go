package golden

import (
	"encoding/json"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// Controller returns a controller file as Metacontroller sends it in a
// request: the object from the YAML, with the metadata the API server adds.
func Controller(t *testing.T, path string) json.RawMessage {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(YAMLToJSON(t, path), &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	meta["uid"] = "2c1d0e9f-8a7b-4c6d-9e5f-4a3b2c1d0e9f"
	meta["resourceVersion"] = "1017"
	meta["generation"] = 1
	meta["creationTimestamp"] = "2025-12-01T00:00:00Z"
	return Raw(t, obj)
}

// Raw encodes an object for a request.
func Raw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Objects builds an ObjectMap from objects with TypeMeta and namespaced
// names, keyed as Metacontroller keys them. keys are the groups that exist
// even when empty (attachments always list every attachment rule's group).
func Objects(t *testing.T, keys []string, objs ...Object) metacontroller.ObjectMap {
	t.Helper()
	m := metacontroller.ObjectMap{}
	for _, k := range keys {
		m[k] = map[string]json.RawMessage{}
	}
	for _, o := range objs {
		key := metacontroller.Key(o.APIVersion, o.Kind)
		if m[key] == nil {
			m[key] = map[string]json.RawMessage{}
		}
		m[key][metacontroller.Name(o.Namespace, o.Name)] = Raw(t, o.Value)
	}
	return m
}

// Object is one entry for Objects.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	Value                             any
}
