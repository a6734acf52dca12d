package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/hooks/cliflag"
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

func TestRun(t *testing.T) {
	dir := t.TempDir()
	// Loopback port 0, so the cases that get as far as serving stop at
	// once: the context is already cancelled.
	local := []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cluster-control-url", "http://127.0.0.1:1"}
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
		"Bare": {
			reason:  "A bare formspec-reporter is a usage mistake naming the one flag without a default.",
			wantErr: "--cluster-control-url is required",
			usage:   true,
		},
		"BadClusterControlURL": {
			reason:  "A Cluster Control URL that is not absolute http(s) is a usage mistake naming the flag.",
			args:    []string{"--cluster-control-url", "formspec-ctl:7070"},
			wantErr: "--cluster-control-url must be an http or https URL",
			usage:   true,
		},
		"ClusterControlURLQuery": {
			reason:  "A query string, where a token gets pasted, is a usage mistake naming the flag.",
			args:    []string{"--cluster-control-url", "https://formspec-ctl:7070/?token=t0k"},
			wantErr: "--cluster-control-url must not carry a query string",
			usage:   true,
		},
		"PlainHTTPWithToken": {
			reason:  "A token over plain HTTP off the loopback is a usage mistake naming the flag that would allow it.",
			args:    []string{"--cluster-control-url", "http://10.0.0.1:7070", "--token-file", filepath.Join(dir, "nope")},
			wantErr: "--insecure-http",
			usage:   true,
		},
		"BadInterceptorAdminURL": {
			reason:  "An interceptor admin URL that is not http://host:port is a usage mistake naming the flag, found before the reporter starts.",
			args:    append(slices.Clone(local), "--interceptor-admin-url", "https://keda-interceptor-admin:9090"),
			wantErr: "--interceptor-admin-url must be http://host:port",
			usage:   true,
		},
		"InterceptorAdminURLWithPassword": {
			reason:  "A user and password in the interceptor admin URL are refused like Cluster Control's, as a usage mistake.",
			args:    append(slices.Clone(local), "--interceptor-admin-url", "http://u:p@keda-interceptor-admin:9090"),
			wantErr: "--interceptor-admin-url",
			usage:   true,
		},
		"UnknownFlag": {
			reason:  "A mistake is a usage error, reported by main (exit 2) without the flag list.",
			args:    []string{"--nope"},
			wantErr: "-nope",
			usage:   true,
		},
		"BadFlagValue": {
			reason:  "A flag value that does not parse is a mistake like an unknown flag.",
			args:    []string{"--max-nodes", "many"},
			wantErr: "-max-nodes",
			usage:   true,
		},
		"BudgetShareAboveOne": {
			reason:  "A share is of the workspaces: more than all of them is a mistake naming the flag.",
			args:    append(slices.Clone(local), "--restart-budget-share", "1.5"),
			wantErr: "--restart-budget-share",
			usage:   true,
		},
		"BudgetShareZero": {
			reason:  "A share of zero would write no directive ever (and reporter.New would take it for the default): a mistake naming the flag.",
			args:    append(slices.Clone(local), "--idle-budget-share", "0"),
			wantErr: "--idle-budget-share",
			usage:   true,
		},
		"BudgetIntervalZero": {
			reason:  "No interval at all is not one the reporter could keep, nor its default: a mistake naming the flag.",
			args:    append(slices.Clone(local), "--restart-min-interval", "0s"),
			wantErr: "--restart-min-interval",
			usage:   true,
		},
		"BudgetRaised": {
			reason: "A planned fleet-wide rollout raises the budget: every workspace at once, a second apart.",
			args:   append(slices.Clone(local), "--restart-budget-share", "1", "--restart-min-interval", "1s"),
		},
		"MissingTokenFile": {
			reason: "The token's Secret is optional: a missing token file must not stop the sidecar, or the hook pod never becomes Ready.",
			args:   append(slices.Clone(local), "--token-file", filepath.Join(dir, "nope")),
		},
		"MissingKubeconfig": {
			reason:  "A --kubeconfig that cannot be read is a mistake reported at start, not a reporter that silently writes nothing.",
			args:    append(slices.Clone(local), "--kubeconfig", filepath.Join(dir, "nope")),
			wantErr: "--kubeconfig",
		},
		"UnreadableTokenFile": {
			reason:  "A token path that exists but is not a readable file is a broken pod spec, reported at start.",
			args:    append(slices.Clone(local), "--token-file", dir),
			wantErr: "--token-file",
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
			const usage = "Usage: formspec-reporter [flags]"
			got := map[string]bool{"stdout": strings.Contains(stdout.String(), usage), "stderr": strings.Contains(stderr.String(), usage)}
			want := map[string]bool{"stdout": tc.wantUsageOn == "stdout", "stderr": tc.wantUsageOn == "stderr"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nusage printed on: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNonLoopbackListen checks that the unauthenticated localhost API on a
// reachable address is not accepted without a word.
func TestNonLoopbackListen(t *testing.T) {
	cases := map[string]struct {
		reason string
		listen string
		warn   bool
	}{
		"Loopback":  {reason: "127.0.0.1 is the pod only.", listen: "127.0.0.1:0"},
		"Localhost": {reason: "localhost is the pod only.", listen: "localhost:0"},
		"IPv6":      {reason: "::1 is the pod only.", listen: "[::1]:0"},
		"Any":       {reason: "All interfaces expose the API to the cluster network.", listen: "0.0.0.0:0", warn: true},
		"NoHost":    {reason: "A bare port is all interfaces too.", listen: ":0", warn: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			args := []string{"--listen", tc.listen, "--metrics-listen", "127.0.0.1:0", "--cluster-control-url", "http://127.0.0.1:1"}
			_ = run(ctx, args, &stdout, &stderr)
			if got := strings.Contains(stderr.String(), "--listen is not a loopback address"); got != tc.warn {
				t.Errorf("%s\nwarning: got %v, want %v\nstderr: %s", tc.reason, got, tc.warn, stderr.String())
			}
		})
	}
}
