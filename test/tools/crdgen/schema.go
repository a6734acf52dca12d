package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
)

// Model names of the upstream types the converter treats specially.
const (
	quantity    = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	intOrString = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	objectMeta  = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
)

// quantityPattern is the regular expression a resource.Quantity string
// matches; the same one controller-gen writes into CRDs.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// keptProperties restricts a type to some of its properties. An
// ObjectMeta nested in a passed-through object (an ephemeral volume's
// claim template) may only carry labels and annotations: the API server
// refuses the rest in a Pod, and the full ObjectMeta schema (managed
// fields, owner references) would be most of the CRD.
var keptProperties = map[string][]string{
	objectMeta: {"annotations", "labels"},
}

// keptFormats are the OpenAPI formats worth keeping: the API server checks
// byte and date-time, and int32 gets explicit bounds (below) so that a value
// Go cannot decode into an int32 is refused at admission.
var keptFormats = map[string]bool{"int32": true, "int64": true, "double": true, "float": true, "byte": true, "date-time": true}

// converter turns upstream OpenAPI definitions (as openapi-gen generates
// them for the API server) into structural CRD schemas: every $ref
// inlined, one type per node, Kubernetes extensions that a CRD accepts
// kept, and the rest (defaults, enums, patch strategies, unions) dropped.
//
// Defaults are dropped because openapi-gen writes the zero value of every
// non-pointer field as its default ("" for a name), which a CRD would
// store. Enums are dropped because core validation accepts values they do
// not list (an empty toleration effect means "all effects"), the same
// choice controller-gen makes for embedded core types.
type converter struct {
	defs map[string]common.OpenAPIDefinition
	// inlining holds the definitions being inlined, to refuse a cycle
	// (a CRD schema cannot refer to itself).
	inlining []string
}

// newConverter reads definitions as GetOpenAPIDefinitions returns them.
func newConverter(get func(common.ReferenceCallback) map[string]common.OpenAPIDefinition) *converter {
	return &converter{defs: get(func(name string) spec.Ref { return spec.MustCreateRef(name) })}
}

// definition converts the named definition.
func (c *converter) definition(name string) (*apiextv1.JSONSchemaProps, error) {
	return c.schema(spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(name)}})
}

// schema converts one schema, inlining what it refers to.
func (c *converter) schema(s spec.Schema) (*apiextv1.JSONSchemaProps, error) {
	if ref := s.Ref.String(); ref != "" {
		out, err := c.ref(ref)
		if err != nil {
			return nil, err
		}
		// A property's own description says what the field is for, which
		// beats the description of its type.
		if d := shortDescription(s.Description); d != "" {
			out.Description = d
		}
		return out, nil
	}
	out := &apiextv1.JSONSchemaProps{Description: shortDescription(s.Description)}
	switch len(s.Type) {
	case 0:
		return nil, fmt.Errorf("schema %q has no type", s.Description)
	case 1:
		out.Type = s.Type[0]
	default:
		return nil, fmt.Errorf("schema %q has several types %v", s.Description, s.Type)
	}
	if keptFormats[s.Format] {
		out.Format = s.Format
	}
	if out.Format == "int32" {
		out.Minimum = ptr.To(float64(math.MinInt32))
		out.Maximum = ptr.To(float64(math.MaxInt32))
	}
	if s.Items != nil {
		if s.Items.Schema == nil {
			return nil, fmt.Errorf("array %q has no single item schema", s.Description)
		}
		items, err := c.schema(*s.Items.Schema)
		if err != nil {
			return nil, err
		}
		out.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: items}
	}
	if ap := s.AdditionalProperties; ap != nil {
		if ap.Schema == nil {
			return nil, fmt.Errorf("map %q has no value schema", s.Description)
		}
		values, err := c.schema(*ap.Schema)
		if err != nil {
			return nil, err
		}
		out.AdditionalProperties = &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: values}
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]apiextv1.JSONSchemaProps, len(s.Properties))
		for name, p := range s.Properties {
			prop, err := c.schema(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out.Properties[name] = *prop
		}
		out.Required = slices.Sorted(slices.Values(s.Required))
	}
	if err := extensions(s.Extensions, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ref converts the named definition, or the CRD form of a type that
// serializes as something other than its Go shape.
func (c *converter) ref(name string) (*apiextv1.JSONSchemaProps, error) {
	switch name {
	case quantity:
		return &apiextv1.JSONSchemaProps{
			AnyOf:        []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
			Pattern:      quantityPattern,
			XIntOrString: true,
		}, nil
	case intOrString:
		return &apiextv1.JSONSchemaProps{
			AnyOf:        []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
			XIntOrString: true,
		}, nil
	}
	if slices.Contains(c.inlining, name) {
		return nil, fmt.Errorf("%s refers to itself through %s", name, strings.Join(c.inlining, " -> "))
	}
	def, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("no OpenAPI definition %s", name)
	}
	s := def.Schema
	if keep, ok := keptProperties[name]; ok {
		props := make(map[string]spec.Schema, len(keep))
		for _, k := range keep {
			p, ok := s.Properties[k]
			if !ok {
				return nil, fmt.Errorf("%s has no property %s", name, k)
			}
			props[k] = p
		}
		s.Properties = props
		s.Required = slices.DeleteFunc(slices.Clone(s.Required), func(r string) bool { return !slices.Contains(keep, r) })
	}
	c.inlining = append(c.inlining, name)
	defer func() { c.inlining = c.inlining[:len(c.inlining)-1] }()
	out, err := c.schema(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// extensions copies the Kubernetes extensions a CRD schema accepts. A
// list-map whose keys are not all required becomes atomic: a CRD refuses
// optional map keys, which upstream types allow when the key has a
// default.
func extensions(ext spec.Extensions, out *apiextv1.JSONSchemaProps) error {
	if t, ok := ext.GetString("x-kubernetes-map-type"); ok {
		out.XMapType = ptr.To(t)
	}
	t, ok := ext.GetString("x-kubernetes-list-type")
	if !ok {
		return nil
	}
	out.XListType = ptr.To(t)
	if t != "map" {
		return nil
	}
	keys, ok := ext.GetStringSlice("x-kubernetes-list-map-keys")
	if !ok || out.Items == nil || out.Items.Schema == nil {
		return fmt.Errorf("list-map %q without keys or items", out.Description)
	}
	for _, k := range keys {
		if !slices.Contains(out.Items.Schema.Required, k) {
			out.XListType = ptr.To("atomic")
			return nil
		}
	}
	out.XListMapKeys = keys
	return nil
}

// shortDescription keeps the first sentence of an upstream description:
// enough for kubectl explain to say what a field is, without the pages of
// detail (enum lists, links, history) that would make the CRD too large
// for kubectl's client-side apply. The full text is in the Kubernetes API
// reference.
func shortDescription(d string) string {
	d, _, _ = strings.Cut(strings.TrimSpace(d), "\n")
	d = strings.Join(strings.Fields(d), " ")
	// Some fields say "Required." first; the sentence after says what
	// they are, and the schema's required list says the rest.
	d = strings.TrimPrefix(d, "Required. ")
	for i := 0; ; {
		j := strings.Index(d[i:], ". ")
		if j < 0 {
			return strings.TrimSpace(d)
		}
		end := i + j + 1
		if !abbreviation(d[:end]) {
			return d[:end]
		}
		i = end
	}
}

// abbreviation reports whether s ends in an abbreviation whose full stop
// does not end a sentence.
func abbreviation(s string) bool {
	for _, a := range []string{"e.g.", "i.e.", "etc.", "vs.", "approx."} {
		if strings.HasSuffix(s, a) {
			return true
		}
	}
	return false
}
