// Package controllercheck checks what a hook package's DecoratorController
// file (compositecontrollers/) says about its hooks: that each is a v2
// webhook on the hook server's Service at the path the server routes.
// Whether the file matches Metacontroller's CRD is not checked here:
// test/integration applies every controller file to a real API server with
// Metacontroller's published CRDs installed, which is the authority.
package controllercheck

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// HookPaths maps each hook a controller declares to the path it must call.
type HookPaths map[string]string

// Decorator reads the DecoratorController in file and checks that it
// declares exactly the hooks in hooks, each a v2 webhook on Service
// formspec-system/formspec-hooks at its path. It returns the decoded
// object for further checks.
func Decorator(t *testing.T, file string, hooks HookPaths) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dc map[string]any
	if err := yaml.UnmarshalStrict(data, &dc); err != nil {
		t.Fatalf("%s: want one DecoratorController document: %v", file, err)
	}
	if got := lookup(dc, "kind"); got != "DecoratorController" {
		t.Errorf("%s: kind %v, want DecoratorController", file, got)
	}
	declared, _ := lookup(dc, "spec", "hooks").(map[string]any)
	for name, path := range hooks {
		h := lookup(dc, "spec", "hooks", name)
		got := []any{lookup(h, "version"), lookup(h, "webhook", "service", "name"), lookup(h, "webhook", "service", "namespace"), lookup(h, "webhook", "path")}
		want := []any{"v2", "formspec-hooks", "formspec-system", path}
		if !slices.Equal(got, want) {
			t.Errorf("%s: hook %s is %v, want %v", file, name, got, want)
		}
	}
	for name := range declared {
		if _, ok := hooks[name]; !ok {
			t.Errorf("%s: unexpected hook %s", file, name)
		}
	}
	return dc
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
