package diff

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Field is one field that an apply would change.
type Field struct {
	// Path names the field: "spec.replicas",
	// "spec.template.spec.containers[resource].image" (list entries with a
	// name are named), "metadata.annotations[formspec.dev/config-hash]".
	Path string `json:"path"`
	// Live and Desired are the values before and after, JSON-encoded and
	// cut short; "(none)" when the field is absent on that side, "{…}" or
	// "[…]" for an object or a list.
	Live    string `json:"live"`
	Desired string `json:"desired"`
}

// Fields lists what differs between two objects as decoded from JSON,
// sorted by path. Lists whose entries all carry a name (containers, env,
// volumes, ports) are compared entry by entry by name, other lists by
// position.
func Fields(live, desired any) []Field {
	var out []Field
	compare("", live, desired, &out)
	slices.SortFunc(out, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// none stands for an absent field.
var none = struct{}{}

func compare(path string, live, desired any, out *[]Field) {
	lm, lok := live.(map[string]any)
	dm, dok := desired.(map[string]any)
	if lok && dok {
		for _, k := range slices.Sorted(maps.Keys(union(lm, dm))) {
			compare(path+key(k), value(lm, k), value(dm, k), out)
		}
		return
	}
	ll, lok := live.([]any)
	dl, dok := desired.([]any)
	if lok && dok {
		compareLists(path, ll, dl, out)
		return
	}
	if !reflect.DeepEqual(live, desired) {
		*out = append(*out, Field{Path: strings.TrimPrefix(path, "."), Live: show(live), Desired: show(desired)})
	}
}

func compareLists(path string, live, desired []any, out *[]Field) {
	ln, lok := names(live)
	dn, dok := names(desired)
	if lok && dok {
		for _, n := range slices.Sorted(maps.Keys(union(ln, dn))) {
			compare(path+"["+n+"]", value(ln, n), value(dn, n), out)
		}
		return
	}
	for i := range max(len(live), len(desired)) {
		compare(fmt.Sprintf("%s[%d]", path, i), at(live, i), at(desired, i), out)
	}
}

// names indexes a list by its entries' names, when every entry is an
// object with a distinct string name.
func names(list []any) (map[string]any, bool) {
	out := make(map[string]any, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if _, dup := out[n]; !ok || dup {
			return nil, false
		}
		out[n] = e
	}
	return out, true
}

func union(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

func value(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return none
}

func at(list []any, i int) any {
	if i < len(list) {
		return list[i]
	}
	return none
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// key is the path step to a map key.
func key(k string) string {
	if identifier.MatchString(k) {
		return "." + k
	}
	return "[" + k + "]"
}

// maxShown is how much of a value a change shows.
const maxShown = 60

func show(v any) string {
	switch v.(type) {
	case struct{}:
		return "(none)"
	case map[string]any:
		return "{…}"
	case []any:
		return "[…]"
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(raw)
	if utf8.RuneCountInString(s) > maxShown {
		s = string([]rune(s)[:maxShown-1]) + "…"
	}
	return s
}
