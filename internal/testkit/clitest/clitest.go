// Package clitest is the one table runner for the binaries' command lines:
// each case runs the command's run function with its arguments, under a
// context that is already cancelled (so a case that gets as far as serving
// stops at once), and checks the error, whether it is a usage mistake and
// where the usage went. HelpIsDocumented keeps a doc's copy of --help
// identical to what the command prints.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/cliflag"
)

// RunFunc is a command's run: its arguments and its two outputs.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Case is one command line and what it must do.
type Case struct {
	Reason string
	Args   []string
	// Want is the error run returns, compared with cmpopts.EquateErrors;
	// nil wants none. It is ignored when WantErr is set.
	Want error
	// WantErr is part of the error's text: the flag the case is about,
	// which the error must name.
	WantErr string
	// Usage is whether the error is a *cliflag.UsageError.
	Usage bool
	// UsageOn is where the usage must appear: "stdout", "stderr" or ""
	// for neither.
	UsageOn string
	// Stdout and Stderr are texts each output must contain.
	Stdout, Stderr []string
}

// Run runs every case of a command whose usage begins with usage, e.g.
// "Usage: formspec-reporter [flags]".
func Run(t *testing.T, usage string, run RunFunc, cases map[string]Case) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			err := run(ctx, tc.Args, &stdout, &stderr)
			switch {
			case tc.WantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.WantErr) {
					t.Errorf("%s\nerror %v, want one naming %q", tc.Reason, err, tc.WantErr)
				}
			default:
				if diff := cmp.Diff(tc.Want, err, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\nerror: -want, +got:\n%s\nstderr: %s", tc.Reason, diff, stderr.String())
				}
			}
			if _, isUsage := errors.AsType[*cliflag.UsageError](err); isUsage != tc.Usage {
				t.Errorf("%s\nusage error: got %v, want %v (%v)", tc.Reason, isUsage, tc.Usage, err)
			}
			got := map[string]bool{"stdout": strings.Contains(stdout.String(), usage), "stderr": strings.Contains(stderr.String(), usage)}
			want := map[string]bool{"stdout": tc.UsageOn == "stdout", "stderr": tc.UsageOn == "stderr"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nusage printed on: -want, +got:\n%s", tc.Reason, diff)
			}
			for _, w := range tc.Stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("%s\nstdout lacks %q:\n%s", tc.Reason, w, stdout.String())
				}
			}
			for _, w := range tc.Stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("%s\nstderr lacks %q:\n%s", tc.Reason, w, stderr.String())
				}
			}
		})
	}
}

// HelpIsDocumented checks that the file doc carries, in a code block, the
// command line "$ command --help" followed by exactly what run prints for
// --help.
func HelpIsDocumented(t *testing.T, run RunFunc, doc, command string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: got %v, want flag.ErrHelp", err)
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "$ "+command+" --help\n"+out.String()+"```") {
		t.Errorf("%s does not carry the current --help output of %s; paste this:\n%s", doc, command, out.String())
	}
}
