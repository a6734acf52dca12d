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

// TestHelpIsDocumented keeps docs/reporter.md's demo section identical to
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
	if !strings.Contains(string(doc), "$ formspec-clustercontrol --help\n"+out.String()+"```") {
		t.Errorf("docs/reporter.md does not carry the current --help output; paste this:\n%s", out.String())
	}
}
