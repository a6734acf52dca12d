package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// coreKey, in the template, stands for the schema of the named upstream
// type (an OpenAPI model name such as io.k8s.api.core.v1.Volume). The keys
// beside it are laid over that schema: theirs win, except that properties
// merge field by field and required lists add up.
const coreKey = "x-formspec-core"

// credentialsRule refuses a reference to a Secret whose name ends in
// -credentials: the suffix of the Secrets the resourceclaim hook writes
// ("<claim>-credentials"), reserved so that no Workspace reads
// another workspace's credentials through the passthrough fields.
var credentialsRule = apiextv1.ValidationRule{
	Rule:    "!self.endsWith('-credentials')",
	Message: `names a Secret ending in "-credentials", a suffix reserved for the operator's credentials Secrets; a workspace gets datastore credentials through spec.datastores`,
}

// credentialsReferences are the fields of the Workspace schema that name a
// Secret a pod would read: every place k8s.io/kubernetes/pkg/api/v1/pod's
// VisitPodSecretNames visits, as it appears under spec.pod. Each gets
// credentialsRule; TestCredentialsReferencesComplete keeps the list in
// step with the visitor.
var credentialsReferences = []string{
	"spec.pod.imagePullSecrets[].name",
	"spec.pod.extraEnv[].valueFrom.secretKeyRef.name",
	"spec.pod.extraEnvFrom[].secretRef.name",
	"spec.pod.extraVolumes[].azureFile.secretName",
	"spec.pod.extraVolumes[].cephfs.secretRef.name",
	"spec.pod.extraVolumes[].cinder.secretRef.name",
	"spec.pod.extraVolumes[].csi.nodePublishSecretRef.name",
	"spec.pod.extraVolumes[].flexVolume.secretRef.name",
	"spec.pod.extraVolumes[].iscsi.secretRef.name",
	"spec.pod.extraVolumes[].projected.sources[].secret.name",
	"spec.pod.extraVolumes[].rbd.secretRef.name",
	"spec.pod.extraVolumes[].scaleIO.secretRef.name",
	"spec.pod.extraVolumes[].secret.secretName",
	"spec.pod.extraVolumes[].storageos.secretRef.name",
}

// generate expands a CRD template: every x-formspec-core node becomes the
// upstream type's schema with the template's keys laid over it, and every
// credentials reference gets its rule. The first paragraph of the
// template's head comment is about the template; header replaces it.
func generate(c *converter, template []byte, header string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, fmt.Errorf("cannot parse the template: %w", err)
	}
	// The parser hangs the comment on the first key.
	if len(doc.Content) != 1 || len(doc.Content[0].Content) == 0 {
		return nil, fmt.Errorf("the template is not one YAML mapping")
	}
	first := doc.Content[0].Content[0]
	_, rest, ok := strings.Cut(first.HeadComment, "\n#\n")
	if !ok {
		return nil, fmt.Errorf("the template's head comment has no second paragraph")
	}
	first.HeadComment = strings.TrimSuffix(header, "\n") + "\n#\n" + rest
	if err := expand(c, &doc); err != nil {
		return nil, err
	}
	schemas, err := openAPISchemas(&doc)
	if err != nil {
		return nil, err
	}
	rule, err := toNode(credentialsRule)
	if err != nil {
		return nil, err
	}
	for _, s := range schemas {
		for _, path := range credentialsReferences {
			field, err := schemaAt(s, path)
			if err != nil {
				return nil, err
			}
			appendValidation(field, rule)
		}
	}
	return encode(&doc)
}

// encode writes n as YAML indented by two spaces, as the CRDs are.
func encode(n *yaml.Node) ([]byte, error) {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("cannot encode the CRD: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("cannot encode the CRD: %w", err)
	}
	return out.Bytes(), nil
}

// expand replaces every x-formspec-core node under n, depth first.
func expand(c *converter, n *yaml.Node) error {
	for _, child := range n.Content {
		if err := expand(c, child); err != nil {
			return err
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	name := value(n, coreKey)
	if name == nil {
		return nil
	}
	s, err := c.definition(name.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", name.Line, err)
	}
	gen, err := toNode(s)
	if err != nil {
		return err
	}
	overlay(gen, n)
	head, line, foot := n.HeadComment, n.LineComment, n.FootComment
	*n = *gen
	n.HeadComment, n.LineComment, n.FootComment = head, line, foot
	return nil
}

// overlay lays the template mapping src over the generated mapping dst.
func overlay(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		if k.Value == coreKey {
			continue
		}
		j := keyIndex(dst, k.Value)
		switch {
		case j < 0:
			dst.Content = append(dst.Content, k, v)
		case k.Value == "properties":
			props := dst.Content[j+1]
			for p := 0; p+1 < len(v.Content); p += 2 {
				name, schema := v.Content[p], v.Content[p+1]
				if q := keyIndex(props, name.Value); q >= 0 {
					overlay(props.Content[q+1], schema)
				} else {
					props.Content = append(props.Content, name, schema)
				}
			}
		case k.Value == "required":
			have := dst.Content[j+1]
			for _, r := range v.Content {
				if !containsScalar(have, r.Value) {
					have.Content = append(have.Content, r)
				}
			}
		default:
			dst.Content[j], dst.Content[j+1] = k, v
		}
	}
}

// openAPISchemas returns the openAPIV3Schema of every version of the CRD.
func openAPISchemas(doc *yaml.Node) ([]*yaml.Node, error) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("the template is not one YAML document")
	}
	spec := value(doc.Content[0], "spec")
	var versions *yaml.Node
	if spec != nil {
		versions = value(spec, "versions")
	}
	if versions == nil || len(versions.Content) == 0 {
		return nil, fmt.Errorf("the template has no spec.versions")
	}
	var out []*yaml.Node
	for _, v := range versions.Content {
		var s *yaml.Node
		if schema := value(v, "schema"); schema != nil {
			s = value(schema, "openAPIV3Schema")
		}
		if s == nil {
			return nil, fmt.Errorf("a version in the template has no schema.openAPIV3Schema")
		}
		out = append(out, s)
	}
	return out, nil
}

// schemaAt finds the schema of a field given as a dotted path, where
// "name[]" stands for the items of the array name.
func schemaAt(s *yaml.Node, path string) (*yaml.Node, error) {
	for _, step := range strings.Split(path, ".") {
		name, array := strings.CutSuffix(step, "[]")
		var props *yaml.Node
		if s.Kind == yaml.MappingNode {
			props = value(s, "properties")
		}
		if props == nil || value(props, name) == nil {
			return nil, fmt.Errorf("the schema has no field %s (looking for %s)", name, path)
		}
		s = value(props, name)
		if array {
			if s = value(s, "items"); s == nil {
				return nil, fmt.Errorf("%s in %s is not an array", name, path)
			}
		}
	}
	return s, nil
}

// appendValidation adds rule to the schema's x-kubernetes-validations.
func appendValidation(s, rule *yaml.Node) {
	if v := value(s, "x-kubernetes-validations"); v != nil {
		v.Content = append(v.Content, rule)
		return
	}
	s.Content = append(s.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "x-kubernetes-validations"},
		&yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{rule}})
}

// toNode turns v into a YAML node by way of its JSON encoding, which keeps
// the field order of Go structs and sorts map keys, in block style.
func toNode(v any) (*yaml.Node, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot encode a schema: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("cannot decode a schema: %w", err)
	}
	n := doc.Content[0]
	blockStyle(n)
	return n, nil
}

// blockStyle clears the flow and quoting styles JSON input comes with, so
// that the encoder writes block YAML and quotes only what needs quoting.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// value returns the value of key in mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// keyIndex returns the index of key in mapping m's content, or -1.
func keyIndex(m *yaml.Node, key string) int {
	if m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// containsScalar reports whether sequence s holds the scalar v.
func containsScalar(s *yaml.Node, v string) bool {
	for _, c := range s.Content {
		if c.Value == v {
			return true
		}
	}
	return false
}
