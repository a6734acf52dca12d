package main

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
)

// defs serves schemas as GetOpenAPIDefinitions would, refs built by the
// callback it is given.
func defs(schemas func(ref common.ReferenceCallback) map[string]spec.Schema) func(common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		out := map[string]common.OpenAPIDefinition{}
		for name, s := range schemas(ref) {
			out[name] = common.OpenAPIDefinition{Schema: s}
		}
		return out
	}
}

func str(description string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Description: description, Type: []string{"string"}, Default: ""}}
}

func object(description string, required []string, props map[string]spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Description: description, Type: []string{"object"}, Required: required, Properties: props}}
}

func list(description string, items spec.Schema, ext spec.Extensions) spec.Schema {
	return spec.Schema{
		VendorExtensible: spec.VendorExtensible{Extensions: ext},
		SchemaProps:      spec.SchemaProps{Description: description, Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &items}},
	}
}

func refTo(ref common.ReferenceCallback, description, name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Description: description, Ref: ref(name)}}
}

func TestConverter(t *testing.T) {
	mapList := spec.Extensions{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name"}, "x-kubernetes-patch-strategy": "merge"}
	cases := map[string]struct {
		reason  string
		schemas func(ref common.ReferenceCallback) map[string]spec.Schema
		want    *apiextv1.JSONSchemaProps
		wantErr bool
	}{
		"RefsInlinedPropertyDescriptionWins": {
			reason: "A $ref is replaced by the definition; the property's description says more than the type's.",
			schemas: func(ref common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{
					"root":  object("Root is the root. It has one field.", nil, map[string]spec.Schema{"inner": refTo(ref, "Inner of the root.", "inner")}),
					"inner": object("Inner is a type.", []string{"name"}, map[string]spec.Schema{"name": str("Name of it.")}),
				}
			},
			want: &apiextv1.JSONSchemaProps{Description: "Root is the root.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"inner": {Description: "Inner of the root.", Type: "object", Required: []string{"name"}, Properties: map[string]apiextv1.JSONSchemaProps{
					"name": {Description: "Name of it.", Type: "string"},
				}},
			}},
		},
		"QuantityAndIntOrString": {
			reason: "Both serialize as a number or a string, which a CRD says with x-kubernetes-int-or-string; a quantity also has its pattern.",
			schemas: func(ref common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": object("Root.", nil, map[string]spec.Schema{
					"size": refTo(ref, "Size.", quantity),
					"port": refTo(ref, "Port.", intOrString),
				})}
			},
			want: &apiextv1.JSONSchemaProps{Description: "Root.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"size": {Description: "Size.", AnyOf: []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}, Pattern: quantityPattern, XIntOrString: true},
				"port": {Description: "Port.", AnyOf: []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}, XIntOrString: true},
			}},
		},
		"Int32Bounded": {
			reason: "An int32 gets the bounds Go decodes, so that admission refuses what the hook could not decode.",
			schemas: func(common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": object("Root.", nil, map[string]spec.Schema{
					"n": {SchemaProps: spec.SchemaProps{Description: "N.", Type: []string{"integer"}, Format: "int32"}},
					"m": {SchemaProps: spec.SchemaProps{Description: "M.", Type: []string{"integer"}, Format: "int64"}},
				})}
			},
			want: &apiextv1.JSONSchemaProps{Description: "Root.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"n": {Description: "N.", Type: "integer", Format: "int32", Minimum: ptr.To(float64(math.MinInt32)), Maximum: ptr.To(float64(math.MaxInt32))},
				"m": {Description: "M.", Type: "integer", Format: "int64"},
			}},
		},
		"DefaultsEnumsAndOtherFormatsDropped": {
			reason: "openapi-gen's zero-value defaults would be stored, and enums refuse values core validation accepts.",
			schemas: func(common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": {SchemaProps: spec.SchemaProps{
					Description: "Root.", Type: []string{"string"}, Format: "int-or-string", Default: "x", Enum: []any{"a", "b"},
				}}}
			},
			want: &apiextv1.JSONSchemaProps{Description: "Root.", Type: "string"},
		},
		"ListMapWithRequiredKeys": {
			reason: "A list-map keyed by required fields stays a list-map; patch strategies go.",
			schemas: func(common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": list("Root.", object("Item.", []string{"name"}, map[string]spec.Schema{"name": str("Name.")}), mapList)}
			},
			want: &apiextv1.JSONSchemaProps{
				Description: "Root.", Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"name"},
				Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
					Description: "Item.", Type: "object", Required: []string{"name"}, Properties: map[string]apiextv1.JSONSchemaProps{"name": {Description: "Name.", Type: "string"}},
				}},
			},
		},
		"ListMapWithOptionalKeyBecomesAtomic": {
			reason: "A CRD refuses a list-map keyed by an optional field.",
			schemas: func(common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": list("Root.", object("Item.", nil, map[string]spec.Schema{"name": str("Name.")}), mapList)}
			},
			want: &apiextv1.JSONSchemaProps{
				Description: "Root.", Type: "array", XListType: ptr.To("atomic"),
				Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
					Description: "Item.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"name": {Description: "Name.", Type: "string"}},
				}},
			},
		},
		"ObjectMetaOnlyLabelsAndAnnotations": {
			reason: "A nested ObjectMeta keeps the two fields a pod's claim template may set.",
			schemas: func(ref common.ReferenceCallback) map[string]spec.Schema {
				strMap := spec.Schema{SchemaProps: spec.SchemaProps{Description: "A map.", Type: []string{"object"}, AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}}}}
				return map[string]spec.Schema{
					"root":     object("Root.", nil, map[string]spec.Schema{"metadata": refTo(ref, "Metadata.", objectMeta)}),
					objectMeta: object("ObjectMeta.", []string{"name"}, map[string]spec.Schema{"name": str("Name."), "labels": strMap, "annotations": strMap, "managedFields": str("Managed.")}),
				}
			},
			want: &apiextv1.JSONSchemaProps{Description: "Root.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"metadata": {Description: "Metadata.", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
					"labels":      {Description: "A map.", Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextv1.JSONSchemaProps{Type: "string"}}},
					"annotations": {Description: "A map.", Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextv1.JSONSchemaProps{Type: "string"}}},
				}},
			}},
		},
		"Cycle": {
			reason: "A CRD schema cannot refer to itself.",
			schemas: func(ref common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": object("Root.", nil, map[string]spec.Schema{"next": refTo(ref, "Next.", "root")})}
			},
			wantErr: true,
		},
		"UnknownRef": {
			reason: "Every $ref must resolve.",
			schemas: func(ref common.ReferenceCallback) map[string]spec.Schema {
				return map[string]spec.Schema{"root": object("Root.", nil, map[string]spec.Schema{"x": refTo(ref, "X.", "nowhere")})}
			},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := newConverter(defs(tc.schemas)).definition("root")
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\ndefinition(root): want error %v, got %v", tc.reason, tc.wantErr, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndefinition(root): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestShortDescription(t *testing.T) {
	cases := map[string]struct {
		in, want string
	}{
		"FirstSentence":     {in: "Name of the volume. Must be a DNS_LABEL.", want: "Name of the volume."},
		"FirstLine":         {in: "Operator of it.\n\nPossible enum values:\n - `\"Equal\"`", want: "Operator of it."},
		"Abbreviation":      {in: "A term matches all objects (i.e. it's a no-op). More.", want: "A term matches all objects (i.e. it's a no-op)."},
		"LeadingRequired":   {in: "Required. A list of node selector terms. The terms are ORed.", want: "A list of node selector terms."},
		"NoFullStop":        {in: "Added capabilities", want: "Added capabilities"},
		"FullStopInAWord":   {in: "Path like a.b.c is fine. Then more.", want: "Path like a.b.c is fine."},
		"Empty":             {in: "", want: ""},
		"TrailingFullStop":  {in: "Just one.", want: "Just one."},
		"SurroundingSpaces": {in: "  Padded.  ", want: "Padded."},
		"DoubleSpaces":      {in: "secretName is the  name of secret", want: "secretName is the name of secret"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := shortDescription(tc.in); got != tc.want {
				t.Errorf("shortDescription(%q): want %q, got %q", tc.in, tc.want, got)
			}
		})
	}
}
