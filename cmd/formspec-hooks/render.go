package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/render"
)

// fileList is a repeatable -f flag.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// runRender prints what the Workspace sync hook would produce for the
// Workspace, ClusterClass and ResourceClaims in the given YAML, offline.
func runRender(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	var files fileList
	fs := cliflag.New(program+" render", renderUsage)
	fs.Var(&files, "f", "YAML file with a Workspace, its ClusterClass and any ResourceClaims, Datastores and endpoint Secrets; repeatable; - or none reads stdin")
	image := fs.String("resource-image", workspace.Defaults.ResourceImage, "workspace image repository; may carry a tag, which then becomes the default version")
	version := fs.String("default-version", "", "image tag for a Workspace without spec.version; needed only for such a Workspace, unless --resource-image has a tag")
	var controlURL string
	clusterControlURLFlags(fs, &controlURL)
	logging := cliflag.AddLogging(fs)
	defer func() { err = logging.Report(stderr, fs.Name(), args, err) }()
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cliflag.Usagef(fs, "unexpected arguments %q (give files with -f)", fs.Args())
	}
	// A version is needed only for a Workspace without spec.version:
	// render.Render says so once the input is read.
	repo, tag, err := workspace.ParseImage(*image, *version)
	if err != nil && !errors.Is(err, workspace.ErrNoVersion) {
		return cliflag.Usagef(fs, "%w", err)
	}
	if err := checkURL(cliflag.Given(fs, "cluster-control-url"), controlURL, true); err != nil {
		return cliflag.Usagef(fs, "%w", err)
	}
	// The same warnings as serve, logged on stderr so that stdout stays
	// YAML.
	logger := logging.Logger(stderr)
	warn := func(msg string) { logger.Warn(msg) }
	cliflag.WarnDeprecated(fs, warn)
	warnNoClusterControl(warn, controlURL)
	if len(files) == 0 {
		files = fileList{"-"}
	}
	var docs []json.RawMessage
	for _, name := range files {
		raw, err := readInputFile(name, stdin)
		if err != nil {
			return err
		}
		shown := name
		if name == "-" {
			shown = "stdin"
		}
		d, err := render.Documents(shown, raw)
		if err != nil {
			return err
		}
		docs = append(docs, d...)
	}
	// Render into a buffer so that a failure prints nothing half-done.
	var out bytes.Buffer
	cfg := workspace.Config{ResourceImage: repo, DefaultVersion: tag, ControlClusterURL: controlURL}
	if err := render.Render(ctx, &out, cfg, docs); err != nil {
		if errors.Is(err, workspace.ErrNoVersion) {
			return cliflag.Usagef(fs, "%w", err)
		}
		return err
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// renderUsage heads render's --help.
const renderUsage = `Usage: formspec-hooks render [-f FILE]... [flags]

Print the children and status the Workspace sync hook would produce, as YAML,
without a cluster. Each input may hold several documents separated by ---; a
field its kind does not have or a value of the wrong type is an error naming
the input, the document and the field.
Given Datastores (and their endpoint Secrets), ResourceClaims are verified as the
resourceclaim hook would and printed with that status; otherwise a claim's own
status decides whether its credentials are injected.

Flags:
`

// readInputFile reads one -f argument; "-" is stdin.
func readInputFile(name string, stdin io.Reader) ([]byte, error) {
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
	return raw, nil
}
