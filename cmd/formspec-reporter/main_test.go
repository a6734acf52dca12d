package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// TestHelpIsDocumented keeps the flag list in docs/reporter.md identical to
// what --help prints.
func TestHelpIsDocumented(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: got %v, want flag.ErrHelp", err)
	}
	doc, err := os.ReadFile("../../docs/reporter.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "$ formspec-reporter --help\n"+out.String()+"```") {
		t.Errorf("docs/reporter.md does not carry the current --help output; paste this:\n%s", out.String())
	}
}

// TestRequiresClusterControlURL checks the one flag without a default.
func TestRequiresClusterControlURL(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "cluster control URL") {
		t.Errorf("without --cluster-control-url: got %v, want an error naming it", err)
	}
}
