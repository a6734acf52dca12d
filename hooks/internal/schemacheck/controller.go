package schemacheck

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
)

// HookPaths is what a controller file should say about one hook.
type HookPaths map[string]string

// CheckDecoratorController validates a DecoratorController YAML file
// against Metacontroller's CRD (skipped when the shared test data is not
// beside the repository) and checks that each named hook is a v2 webhook
// on Service formspec-system/formspec-hooks at the given path. It returns
// the decoded object for further checks.
func CheckDecoratorController(t *testing.T, repoRoot, file string, hooks HookPaths) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Documents(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: want one document, got %d", file, len(docs))
	}
	dc := docs[0]
	crdFile := SharedTestdata(repoRoot, "metacontroller-crds-v1.yaml")
	switch crds, err := os.ReadFile(crdFile); {
	case errors.Is(err, os.ErrNotExist):
		t.Logf("%s not found; schema not checked (set FORMSPEC_SHARED)", crdFile)
	case err != nil:
		t.Fatal(err)
	default:
		schema, err := CRDSchema(crds, "decoratorcontrollers.metacontroller.k8s.io", "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		if errs := Validate(schema, dc); len(errs) > 0 {
			t.Errorf("%s does not match the DecoratorController schema:\n%v", file, errs)
		}
	}
	if got := fmt.Sprint(lookup(dc, "kind")); got != "DecoratorController" {
		t.Errorf("%s: kind %s, want DecoratorController", file, got)
	}
	for name, path := range hooks {
		h := lookup(dc, "spec", "hooks", name)
		got := []any{lookup(h, "version"), lookup(h, "webhook", "service", "name"), lookup(h, "webhook", "service", "namespace"), lookup(h, "webhook", "path")}
		want := []any{"v2", "formspec-hooks", "formspec-system", path}
		if !slices.Equal(got, want) {
			t.Errorf("%s: hook %s is %v, want %v", file, name, got, want)
		}
	}
	for name := range lookup(dc, "spec", "hooks").(map[string]any) {
		if _, ok := hooks[name]; !ok {
			t.Errorf("%s: unexpected hook %s", file, name)
		}
	}
	return dc
}
