package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/hooks/workspace"
)

// fileList is a repeatable -f flag.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// runRender prints what the Workspace sync hook would produce for the
// Workspace, ClusterClass and ResourceClaims in the given YAML, offline.
func runRender(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var files fileList
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&files, "f", "YAML file with a Workspace, its ClusterClass and any ResourceClaims; repeatable; - or none reads stdin")
	image := fs.String("resource-image", "formahub/formspec-resource", "workspace image repository; may carry a tag, which then becomes the default version")
	version := fs.String("default-version", "", "image tag for Workspaces without spec.version (default: the tag in --resource-image, else \"latest\")")
	controlURL := fs.String("control-cluster-url", "", "Cluster Control URL given to workspaces as CONTROL_CLUSTER_URL")
	if err := fs.Parse(args); err != nil {
		out := stderr
		if errors.Is(err, flag.ErrHelp) {
			out = stdout
		}
		fmt.Fprintln(out, "Usage: formspec-hooks render [-f FILE]... [flags]")
		fmt.Fprintln(out, "\nPrint the children and status the Workspace sync hook would produce, as YAML,")
		fmt.Fprintln(out, "without a cluster. Each input may hold several documents separated by ---.")
		fmt.Fprintln(out, "\nFlags:")
		fs.SetOutput(out)
		fs.PrintDefaults()
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (give files with -f)", fs.Args())
	}
	repo, tag, err := resolveImage(*image, *version)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		files = fileList{"-"}
	}
	var docs []json.RawMessage
	for _, name := range files {
		d, err := readDocuments(name, stdin)
		if err != nil {
			return err
		}
		docs = append(docs, d...)
	}
	req, err := renderRequest(docs)
	if err != nil {
		return err
	}
	hooks := workspace.New(workspace.Config{ResourceImage: repo, DefaultVersion: tag, ControlClusterURL: *controlURL})
	resp, err := hooks.Sync(ctx, req)
	if err != nil {
		return err
	}
	return writeRendered(stdout, req, resp)
}

// readDocuments reads the YAML documents of one file ("-" is stdin) as JSON.
func readDocuments(name string, stdin io.Reader) ([]json.RawMessage, error) {
	var raw []byte
	var err error
	if name == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	var out []json.RawMessage
	for i, doc := range splitYAML(raw) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		out = append(out, j)
	}
	return out, nil
}

// splitYAML cuts a multi-document stream at lines that are exactly "---".
func splitYAML(raw []byte) [][]byte {
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
	return append(docs, cur.Bytes())
}

// renderRequest builds the sync request Metacontroller would send for a
// first sync: the Workspace as parent, nothing observed, the class and
// claims as related objects.
func renderRequest(docs []json.RawMessage) (*metacontroller.CompositeRequest, error) {
	req := &metacontroller.CompositeRequest{Children: metacontroller.ObjectMap{}, Related: metacontroller.ObjectMap{}}
	for _, doc := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("cannot read object: %w", err)
		}
		if meta.APIVersion != v1alpha1.APIVersion {
			return nil, fmt.Errorf("unexpected %s %s %q: render reads %s objects only", meta.APIVersion, meta.Kind, meta.Metadata.Name, v1alpha1.APIVersion)
		}
		switch meta.Kind {
		case "Workspace":
			if req.Parent != nil {
				return nil, errors.New("more than one Workspace given; render one at a time")
			}
			req.Parent = withDefaultNamespace(doc)
		case "ClusterClass", "ResourceClaim":
			ns := meta.Metadata.Namespace
			if meta.Kind == "ResourceClaim" && ns == "" {
				ns = "default"
				doc = withDefaultNamespace(doc)
			}
			key := metacontroller.Key(meta.APIVersion, meta.Kind)
			if req.Related[key] == nil {
				req.Related[key] = map[string]json.RawMessage{}
			}
			req.Related[key][metacontroller.Name(ns, meta.Metadata.Name)] = doc
		default:
			return nil, fmt.Errorf("unexpected kind %s %q: want Workspace, ClusterClass or ResourceClaim", meta.Kind, meta.Metadata.Name)
		}
	}
	if req.Parent == nil {
		return nil, errors.New("no Workspace in the input")
	}
	return req, nil
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
// the hook computed.
func writeRendered(w io.Writer, req *metacontroller.CompositeRequest, resp *metacontroller.CompositeResponse) error {
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
	docs := make([]any, 0, len(resp.Children)+1)
	for _, c := range resp.Children {
		docs = append(docs, c)
	}
	docs = append(docs, parent)
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
