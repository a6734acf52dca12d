// Package render produces, offline, what the Workspace sync hook would answer
// for objects read from YAML: the children and the status, as YAML. It
// builds the request Metacontroller would send for a first sync and calls
// the hooks' own functions, so what it prints is what a server would do.
// It is the engine of `formspec-hooks render`.
package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
)

// Render writes to w what the Workspace sync hook answers for the objects
// in docs (JSON, one object each): the desired children, then the Workspace
// with its status, then any ResourceClaims it verified.
func Render(ctx context.Context, w io.Writer, cfg workspace.Config, docs []json.RawMessage) error {
	in, err := readInput(docs)
	if err != nil {
		return err
	}
	if cfg.DefaultVersion == "" {
		// Only a Workspace without spec.version needs the default, and
		// there is no implicit latest (workspace.ParseImage).
		var ws struct {
			Metadata struct{ Name, Namespace string }
			Spec     struct{ Version string }
		}
		if err := json.Unmarshal(in.workspace, &ws); err != nil {
			return err
		}
		if ws.Spec.Version == "" {
			return fmt.Errorf("%w (Workspace %s/%s has no spec.version)", workspace.ErrNoVersion, ws.Metadata.Namespace, ws.Metadata.Name)
		}
	}
	claims, err := verifyClaims(ctx, in)
	if err != nil {
		return err
	}
	// The claims render verified come to the hook as related objects: no
	// reporter summarises them here.
	cfg.Claims = workspace.ClaimsRelated
	req := renderRequest(in)
	resp, err := Sync(ctx, cfg, req)
	if err != nil {
		return err
	}
	return writeRendered(w, req, resp, claims)
}

// Documents converts the YAML documents of one input, named name in errors,
// to JSON, skipping empty ones, and checks each object of a kind render
// reads against its Go type (checkDocument): an error names the input,
// the document and the field.
func Documents(name string, raw []byte) ([]json.RawMessage, error) {
	parts, err := SplitYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []json.RawMessage
	for i, doc := range parts {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not valid YAML%s", name, i+1, yamlLine(err))
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		var head objectHead
		if err := json.Unmarshal(j, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: not an object with apiVersion, kind and metadata", name, i+1)
		}
		if err := checkDocument(head.APIVersion+" "+head.Kind, j); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s %q): %w", name, i+1, head.Kind, head.Metadata.Name, err)
		}
		out = append(out, j)
	}
	return out, nil
}

// yamlErrorLine finds the line a YAML parser's error names.
var yamlErrorLine = regexp.MustCompile(`\byaml: line (\d+):`)

// yamlLine is " (line N)" for a YAML error that names its line, and ""
// otherwise. The parser's own words are not passed on: some quote the
// document (an unknown alias names its anchor, which in a Secret
// carelessly passed along is a value), and a Secret's value must not
// reach a terminal or a CI log.
func yamlLine(err error) string {
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		return " (line " + m[1] + ")"
	}
	return ""
}

// objectHead is what identifies an object.
type objectHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// SplitYAML cuts a multi-document stream at lines that are exactly "---".
func SplitYAML(raw []byte) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot split YAML documents: %w", err)
	}
	return append(docs, cur.Bytes()), nil
}

// renderInput is what render read: the Workspace and everything it may
// relate to.
type renderInput struct {
	workspace json.RawMessage
	// related holds ClusterClasses, ResourceClaims, Datastores and Secrets
	// keyed as Metacontroller keys related objects.
	related metacontroller.ObjectMap
}

// readInput sorts the documents by kind. Objects without a namespace go to
// "default", as kubectl apply would put them.
func readInput(docs []json.RawMessage) (*renderInput, error) {
	in := &renderInput{related: metacontroller.ObjectMap{}}
	for _, doc := range docs {
		var meta objectHead
		if err := json.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("cannot read object: %w", err)
		}
		kind := meta.APIVersion + " " + meta.Kind
		switch kind {
		case v1alpha1.APIVersion + " Workspace":
			if in.workspace != nil {
				return nil, errors.New("more than one Workspace given; render one at a time")
			}
			in.workspace = withDefaultNamespace(doc)
		case v1alpha1.APIVersion + " ClusterClass", v1alpha1.APIVersion + " ResourceClaim", v1alpha1.APIVersion + " Datastore", "v1 Secret":
			ns := meta.Metadata.Namespace
			if kind == "v1 Secret" {
				var err error
				if doc, err = foldStringData(doc); err != nil {
					return nil, fmt.Errorf("cannot read Secret %q: %w", meta.Metadata.Name, err)
				}
			}
			if meta.Kind != "ClusterClass" {
				if ns == "" {
					ns = "default"
				}
				doc = withDefaultNamespace(doc)
			}
			key := metacontroller.Key(meta.APIVersion, meta.Kind)
			if in.related[key] == nil {
				in.related[key] = map[string]json.RawMessage{}
			}
			in.related[key][metacontroller.Name(ns, meta.Metadata.Name)] = doc
		default:
			return nil, fmt.Errorf("unexpected %s %q: render reads Workspace, ClusterClass, ResourceClaim and Datastore (%s) and v1 Secret objects", kind, meta.Metadata.Name, v1alpha1.APIVersion)
		}
	}
	if in.workspace == nil {
		return nil, errors.New("no Workspace in the input")
	}
	return in, nil
}

// verifyClaims gives every ResourceClaim the status the resourceclaim hook
// would give it, when the input holds Datastores to verify it against; a
// claim is otherwise taken with the status it carries. The credentials
// Secrets the hook would create are not printed: they hold the secrets.
func verifyClaims(ctx context.Context, in *renderInput) ([]json.RawMessage, error) {
	claimKey := metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim")
	if len(in.related[metacontroller.Key(v1alpha1.APIVersion, "Datastore")]) == 0 {
		return nil, nil
	}
	rc := resourceclaim.New(resourceclaim.Options{})
	var verified []json.RawMessage
	for _, name := range slices.Sorted(maps.Keys(in.related[claimKey])) {
		raw := in.related[claimKey][name]
		resp, err := rc.Sync(ctx, &metacontroller.DecoratorRequest{Object: raw, Attachments: metacontroller.ObjectMap{}, Related: in.related})
		if err != nil {
			return nil, fmt.Errorf("cannot verify ResourceClaim %s: %w", name, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		status, err := json.Marshal(resp.Status)
		if err != nil {
			return nil, err
		}
		var st any
		if err := json.Unmarshal(status, &st); err != nil {
			return nil, err
		}
		obj["status"] = st
		out, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		in.related[claimKey][name] = out
		verified = append(verified, out)
	}
	return verified, nil
}

// renderRequest builds the sync request Metacontroller would send for a
// first sync: the Workspace as parent, nothing observed, the class and
// claims as related objects.
func renderRequest(in *renderInput) *metacontroller.CompositeRequest {
	related := metacontroller.ObjectMap{}
	for _, kind := range []string{"ClusterClass", "ResourceClaim"} {
		key := metacontroller.Key(v1alpha1.APIVersion, kind)
		if in.related[key] != nil {
			related[key] = in.related[key]
		}
	}
	return &metacontroller.CompositeRequest{Parent: in.workspace, Children: metacontroller.ObjectMap{}, Related: related}
}

// foldStringData moves a Secret's stringData into data, as the API server
// does on write: a Secret file written by hand usually has only stringData.
func foldStringData(doc json.RawMessage) (json.RawMessage, error) {
	var secret corev1.Secret
	if err := json.Unmarshal(doc, &secret); err != nil {
		return nil, err
	}
	if len(secret.StringData) == 0 {
		return doc, nil
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	for k, v := range secret.StringData {
		secret.Data[k] = []byte(v)
	}
	secret.StringData = nil
	return json.Marshal(&secret)
}

// withDefaultNamespace puts an object without a namespace in "default", as
// kubectl apply would.
func withDefaultNamespace(doc json.RawMessage) json.RawMessage {
	var obj map[string]any
	if json.Unmarshal(doc, &obj) != nil {
		return doc
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		return doc
	}
	meta["namespace"] = "default"
	out, err := json.Marshal(obj)
	if err != nil {
		return doc
	}
	return out
}

// writeRendered prints the children, then the Workspace with the status
// the hook computed, then any claims render verified.
func writeRendered(w io.Writer, req *metacontroller.CompositeRequest, resp *metacontroller.CompositeResponse, claims []json.RawMessage) error {
	var parent map[string]any
	if err := json.Unmarshal(req.Parent, &parent); err != nil {
		return err
	}
	status, err := json.Marshal(resp.Status)
	if err != nil {
		return err
	}
	var st any
	if err := json.Unmarshal(status, &st); err != nil {
		return err
	}
	parent["status"] = st
	docs := append(make([]any, 0, len(resp.Children)+1), resp.Children...)
	docs = append(docs, parent)
	for _, c := range claims {
		var obj map[string]any
		if err := json.Unmarshal(c, &obj); err != nil {
			return err
		}
		docs = append(docs, obj)
	}
	for i, d := range docs {
		out, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}
