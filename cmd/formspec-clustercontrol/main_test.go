package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/hooks/cliflag"
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

func TestRun(t *testing.T) {
	adminTokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(adminTokens, []byte("admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		args   []string
		want   error
		// wantErr is part of the error's text: the flag the case is
		// about, which the error must name.
		wantErr string
		// usage is whether the error is a *cliflag.UsageError.
		usage bool
		// wantUsageOn is where the usage must appear: "stdout", "stderr"
		// or "" for neither.
		wantUsageOn string
	}{
		"Help": {
			reason:      "--help prints usage to stdout and reports flag.ErrHelp, which main turns into exit 0.",
			args:        []string{"--help"},
			want:        flag.ErrHelp,
			wantUsageOn: "stdout",
		},
		"UnknownFlag": {
			reason:  "A mistake is a usage error, reported by main (exit 2) without the flag list.",
			args:    []string{"--nope"},
			wantErr: "-nope",
			usage:   true,
		},
		"MissingTokenFile": {
			reason:  "A token file named must be there: without it, the server would accept anyone.",
			args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "", "--token-file", filepath.Join(t.TempDir(), "nope")},
			wantErr: "--token-file",
		},
		"MissingAdminTokenFile": {
			reason:  "An admin token file named must be there.",
			args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file", filepath.Join(t.TempDir(), "nope")},
			wantErr: "--admin-token-file",
		},
		"OffLoopbackWithoutToken": {
			reason:  "An API anyone on the network reaches needs a token: a usage error naming --token-file, before anything listens.",
			args:    []string{"--listen", "0.0.0.0:0", "--admin-listen", ""},
			wantErr: "--token-file",
			usage:   true,
		},
		"AdminWithoutToken": {
			reason:  "The admin API always needs a token: it decides what the reporter writes onto Workspaces.",
			args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
			wantErr: "--admin-token-file",
			usage:   true,
		},
		"NoBudget": {
			reason:  "A server that may keep nothing is a mistake.",
			args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "", "--max-stored-bytes", "0"},
			wantErr: "--max-stored-bytes",
			usage:   true,
		},
		"ServesAndStops": {
			reason: "Valid flags serve until the context ends, then stop cleanly.",
			args:   []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file", adminTokens},
		},
		"OffLoopbackWithToken": {
			reason: "With --token-file the API may listen beyond the loopback.",
			args:   []string{"--listen", "0.0.0.0:0", "--admin-listen", "", "--token-file", adminTokens},
		},
		"LoopbackWithoutToken": {
			reason: "On loopback the API may go without a token, as make run starts it.",
			args:   []string{"--listen", "127.0.0.1:0", "--admin-listen", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			err := run(ctx, tc.args, &stdout, &stderr)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nerror %v, want one naming %q", tc.reason, err, tc.wantErr)
				}
			default:
				if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\nerror: -want, +got:\n%s\nstderr: %s", tc.reason, diff, stderr.String())
				}
			}
			if _, usage := errors.AsType[*cliflag.UsageError](err); usage != tc.usage {
				t.Errorf("%s\nusage error: got %v, want %v (%v)", tc.reason, usage, tc.usage, err)
			}
			const usage = "Usage: formspec-clustercontrol [flags]"
			got := map[string]bool{"stdout": strings.Contains(stdout.String(), usage), "stderr": strings.Contains(stderr.String(), usage)}
			want := map[string]bool{"stdout": tc.wantUsageOn == "stdout", "stderr": tc.wantUsageOn == "stderr"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nusage printed on: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
