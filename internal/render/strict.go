package render

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// kinds are the objects render reads, each with its Go type: a document is
// checked against the type before anything else reads it.
var kinds = map[string]func() any{
	v1alpha1.APIVersion + " Workspace":     func() any { return new(v1alpha1.Workspace) },
	v1alpha1.APIVersion + " ClusterClass":  func() any { return new(v1alpha1.ClusterClass) },
	v1alpha1.APIVersion + " ResourceClaim": func() any { return new(v1alpha1.ResourceClaim) },
	v1alpha1.APIVersion + " Datastore":     func() any { return new(v1alpha1.Datastore) },
	"v1 Secret":                            func() any { return new(corev1.Secret) },
}

// checkDocument judges one document as the API server would before
// storing it: a field its kind does not have (a typo such as clusterClas)
// or a value of the wrong type is an error naming the field by its path.
// Messages never quote a value, since a Secret's are secret. Kinds render
// does not read are left to readInput, which refuses them.
func checkDocument(kind string, doc []byte) error {
	newObj, ok := kinds[kind]
	if !ok {
		return nil
	}
	unknown, err := sigsjson.UnmarshalStrict(doc, newObj(), sigsjson.DisallowUnknownFields)
	if err != nil {
		return typeError(doc, newObj, err)
	}
	if len(unknown) == 0 {
		return nil
	}
	var paths []string
	for _, e := range unknown {
		if fe, ok := e.(sigsjson.FieldError); ok {
			paths = append(paths, strconv.Quote(fe.FieldPath()))
		}
	}
	slices.Sort(paths)
	if len(paths) == 1 {
		return fmt.Errorf("unknown field %s", paths[0])
	}
	return fmt.Errorf("unknown fields %s", strings.Join(paths, ", "))
}

// typeError describes a document that does not decode into its kind's
// type. The field is found as the one value whose removal lets the
// document decode, which names map keys and list items where
// encoding/json's own path stops at the map or list, and finds the field
// of a value its type decodes itself (a quantity, a time), whose error
// names none. The words come from encoding/json's type error when there
// is one.
func typeError(doc []byte, newObj func() any, err error) error {
	where := culprit(doc, newObj)
	var te *json.UnmarshalTypeError
	if errors.As(json.Unmarshal(doc, newObj()), &te) {
		return fmt.Errorf("%s: want %s, got %s", cmp.Or(where, te.Field, "the object"), typeWord(te.Type), valueWord(te.Value))
	}
	if where != "" {
		return fmt.Errorf("%s: %v", where, err)
	}
	return fmt.Errorf("does not decode: %v", err)
}

// culprit is the path of the deepest value whose removal lets doc decode,
// or "" when there is none (more than one value is wrong).
func culprit(doc []byte, newObj func() any) string {
	var tree any
	if json.Unmarshal(doc, &tree) != nil {
		return ""
	}
	for _, p := range nodes(tree, nil) {
		trimmed, err := json.Marshal(without(tree, p))
		if err == nil && json.Unmarshal(trimmed, newObj()) == nil {
			return p.String()
		}
	}
	return ""
}

// typeWord says in words what a Go type takes.
func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// valueWord says in words what kind of JSON value was found, never the
// value itself.
func valueWord(v string) string {
	switch kind, _, _ := strings.Cut(v, " "); kind {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return "another kind of value"
}

// path names a value in a decoded JSON tree: object keys (string) and
// list indexes (int).
type path []any

func (p path) String() string {
	var b strings.Builder
	for _, step := range p {
		switch step := step.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", step)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(step)
		}
	}
	return b.String()
}

// nodes lists the paths of the values of a decoded JSON tree below at,
// each value after those inside it (so the first whose removal helps is
// the deepest), in a fixed order.
func nodes(v any, at path) []path {
	var out []path
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, nodes(v[k], append(slices.Clip(at), k))...)
		}
	case []any:
		for i, item := range v {
			out = append(out, nodes(item, append(slices.Clip(at), i))...)
		}
	}
	if len(at) > 0 {
		out = append(out, at)
	}
	return out
}

// without returns a copy of tree without the value at p.
func without(tree any, p path) any {
	if len(p) == 0 {
		return nil
	}
	switch v := tree.(type) {
	case map[string]any:
		k, _ := p[0].(string)
		out := maps.Clone(v)
		if len(p) == 1 {
			delete(out, k)
		} else {
			out[k] = without(v[k], p[1:])
		}
		return out
	case []any:
		i, _ := p[0].(int)
		out := slices.Clone(v)
		if len(p) == 1 {
			return slices.Delete(out, i, i+1)
		}
		out[i] = without(v[i], p[1:])
		return out
	}
	return tree
}
