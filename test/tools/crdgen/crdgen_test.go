package main

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/generated/openapi"
	sigsyaml "sigs.k8s.io/yaml"
)

// generated is the CRD as the generator writes it from the checked-in
// template.
func generated(t *testing.T) []byte {
	t.Helper()
	template, err := os.ReadFile(defaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := generate(newConverter(openapi.GetOpenAPIDefinitions), template, header)
	if err != nil {
		t.Fatalf("generate(...): %v", err)
	}
	return crd
}

func TestGeneratedCRDIsCurrent(t *testing.T) {
	checkedIn, err := os.ReadFile(defaultOut)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(generated(t)), "\n"), strings.Split(string(checkedIn), "\n")); diff != "" {
		t.Errorf("%s is not what test/tools/crdgen writes from %s; run make crds.\n-generated, +checked in:\n%s", defaultOut, defaultTemplate, diff)
	}
}

// TestGeneratedCRDValid runs the API server's own validation of a CRD on
// the generated one (structural schema, CEL compilation and cost
// estimates), so that a mistake in the template shows here without a
// control plane; test/integration then installs it for real.
func TestGeneratedCRDValid(t *testing.T) {
	var crd apiextv1.CustomResourceDefinition
	if err := sigsyaml.UnmarshalStrict(generated(t), &crd); err != nil {
		t.Fatal(err)
	}
	apiextv1.SetObjectDefaults_CustomResourceDefinition(&crd)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil); err != nil {
		t.Fatal(err)
	}
	for _, err := range validation.ValidateCustomResourceDefinition(context.Background(), &internal) {
		t.Error(err)
	}
}

// podPaths maps where a pod field is in a PodSpec to where the Workspace
// passes it through.
var podPaths = map[string]string{
	"spec.imagePullSecrets[].":     "spec.pod.imagePullSecrets[].",
	"spec.containers[].env[].":     "spec.pod.extraEnv[].",
	"spec.containers[].envFrom[].": "spec.pod.extraEnvFrom[].",
	"spec.volumes[].":              "spec.pod.extraVolumes[].",
}

// TestCredentialsReferencesComplete checks credentialsReferences against
// Kubernetes' own list of the Secrets a pod uses (the one the node
// authorizer relies on): a pod whose every passed-through field is set,
// each string to its own path, visits exactly the listed paths.
func TestCredentialsReferencesComplete(t *testing.T) {
	p := &corev1.Pod{}
	fill(reflect.ValueOf(&p.Spec.ImagePullSecrets).Elem(), "spec.imagePullSecrets")
	c := corev1.Container{}
	fill(reflect.ValueOf(&c.Env).Elem(), "spec.containers[].env")
	fill(reflect.ValueOf(&c.EnvFrom).Elem(), "spec.containers[].envFrom")
	p.Spec.Containers = []corev1.Container{c}
	// The visitor looks at one source per volume, as a valid volume has
	// one: a volume per source.
	sources := reflect.TypeFor[corev1.VolumeSource]()
	for i := range sources.NumField() {
		v := corev1.Volume{}
		f := sources.Field(i)
		fill(reflect.ValueOf(&v.VolumeSource).Elem().Field(i), "spec.volumes[]."+jsonName(f))
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	}

	var got []string
	pod.VisitPodSecretNames(p, func(path string) bool {
		for from, to := range podPaths {
			if rest, ok := strings.CutPrefix(path, from); ok {
				path = to + rest
				break
			}
		}
		got = append(got, path)
		return true
	})
	slices.Sort(got)
	want := slices.Sorted(slices.Values(credentialsReferences))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Secret references: -credentialsReferences, +visited by VisitPodSecretNames:\n%s", diff)
	}
}

// fill sets every string under v to its JSON path, allocating pointers and
// giving each slice one element.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path+"[]")
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name := jsonName(f)
			switch {
			case f.Anonymous:
				fill(v.Field(i), path)
			case name != "-":
				fill(v.Field(i), path+"."+name)
			}
		}
	}
}

// jsonName is a struct field's name in JSON.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// TestCredentialsRuleInCRD checks the written CRD: the rule refusing
// credentials Secrets is on every listed reference and nowhere else.
func TestCredentialsRuleInCRD(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(generated(t), &doc); err != nil {
		t.Fatal(err)
	}
	schemas, err := openAPISchemas(&doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		var got []string
		var walk func(n *yaml.Node, path string)
		walk = func(n *yaml.Node, path string) {
			if rules := value(n, "x-kubernetes-validations"); rules != nil {
				for _, r := range rules.Content {
					if value(r, "rule").Value == credentialsRule.Rule && value(r, "message").Value == credentialsRule.Message {
						got = append(got, strings.TrimPrefix(path, "."))
					}
				}
			}
			if props := value(n, "properties"); props != nil {
				for i := 0; i+1 < len(props.Content); i += 2 {
					walk(props.Content[i+1], path+"."+props.Content[i].Value)
				}
			}
			if items := value(n, "items"); items != nil {
				walk(items, path+"[]")
			}
		}
		walk(s, "")
		slices.Sort(got)
		want := slices.Sorted(slices.Values(credentialsReferences))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fields with the credentials rule: -want, +got:\n%s", diff)
		}
	}
}

func TestOverlay(t *testing.T) {
	cases := map[string]struct {
		reason        string
		gen, template string
		want          string
	}{
		"TemplateWins": {
			reason:   "A key the template sets replaces the generated one; the core key itself goes.",
			gen:      "description: Upstream.\ntype: object\n",
			template: "x-formspec-core: io.k8s.api.core.v1.Volume\ndescription: Ours.\n",
			want:     "description: Ours.\ntype: object\n",
		},
		"PropertiesMerge": {
			reason:   "Properties merge field by field: generated fields stay, the template's add keys or fields.",
			gen:      "properties:\n  name:\n    type: string\n  path:\n    type: string\n",
			template: "properties:\n  name:\n    maxLength: 63\n  extra:\n    type: boolean\n",
			want:     "properties:\n  name:\n    type: string\n    maxLength: 63\n  path:\n    type: string\n  extra:\n    type: boolean\n",
		},
		"RequiredAddsUp": {
			reason:   "A field required upstream stays required.",
			gen:      "required:\n  - name\n",
			template: "required: [name, path]\n",
			want:     "required:\n  - name\n  - path\n",
		},
		"NewKeysAppended": {
			reason:   "Keys the generated schema lacks are added after its own.",
			gen:      "type: array\n",
			template: "maxItems: 8\n",
			want:     "type: array\nmaxItems: 8\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var gen, template yaml.Node
			if err := yaml.Unmarshal([]byte(tc.gen), &gen); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(tc.template), &template); err != nil {
				t.Fatal(err)
			}
			overlay(gen.Content[0], template.Content[0])
			blockStyle(gen.Content[0])
			out, err := encode(gen.Content[0])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("%s\noverlay(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
