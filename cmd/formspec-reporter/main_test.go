package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/testkit/clitest"
)

// TestHelpIsDocumented keeps the flag list in docs/reporter.md identical to
// what --help prints.
func TestHelpIsDocumented(t *testing.T) {
	clitest.HelpIsDocumented(t, run, "../../docs/reporter.md", "formspec-reporter")
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	// Loopback port 0, so the cases that get as far as serving stop at
	// once: the context is already cancelled.
	local := []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cluster-control-url", "http://127.0.0.1:1"}
	clitest.Run(t, "Usage: formspec-reporter [flags]", run, map[string]clitest.Case{
		"Help": {
			Reason:  "--help prints usage to stdout and reports flag.ErrHelp, which main turns into exit 0.",
			Args:    []string{"--help"},
			Want:    flag.ErrHelp,
			UsageOn: "stdout",
		},
		"Bare": {
			Reason:  "A bare formspec-reporter is a usage mistake naming the one flag without a default.",
			WantErr: "--cluster-control-url is required",
			Usage:   true,
		},
		"BadClusterControlURL": {
			Reason:  "A Cluster Control URL that is not absolute http(s) is a usage mistake naming the flag.",
			Args:    []string{"--cluster-control-url", "formspec-ctl:7070"},
			WantErr: "--cluster-control-url must be an http or https URL",
			Usage:   true,
		},
		"ClusterControlURLQuery": {
			Reason:  "A query string, where a token gets pasted, is a usage mistake naming the flag.",
			Args:    []string{"--cluster-control-url", "https://formspec-ctl:7070/?token=t0k"},
			WantErr: "--cluster-control-url must not carry a query string",
			Usage:   true,
		},
		"PlainHTTPWithToken": {
			Reason:  "A token over plain HTTP off the loopback is a usage mistake naming the flag that would allow it.",
			Args:    []string{"--cluster-control-url", "http://10.0.0.1:7070", "--token-file", filepath.Join(dir, "nope")},
			WantErr: "--insecure-http",
			Usage:   true,
		},
		"BadInterceptorAdminURL": {
			Reason:  "An interceptor admin URL that is not http://host:port is a usage mistake naming the flag, found before the reporter starts.",
			Args:    append(slices.Clone(local), "--interceptor-admin-url", "https://keda-interceptor-admin:9090"),
			WantErr: "--interceptor-admin-url must be http://host:port",
			Usage:   true,
		},
		"InterceptorAdminURLWithPassword": {
			Reason:  "A user and password in the interceptor admin URL are refused like Cluster Control's, as a usage mistake.",
			Args:    append(slices.Clone(local), "--interceptor-admin-url", "http://u:p@keda-interceptor-admin:9090"),
			WantErr: "--interceptor-admin-url",
			Usage:   true,
		},
		"UnknownFlag": {
			Reason:  "A mistake is a usage error, reported by main (exit 2) without the flag list.",
			Args:    []string{"--nope"},
			WantErr: "-nope",
			Usage:   true,
		},
		"BadFlagValue": {
			Reason:  "A flag value that does not parse is a mistake like an unknown flag.",
			Args:    []string{"--max-nodes", "many"},
			WantErr: "-max-nodes",
			Usage:   true,
		},
		"NegativeBound": {
			Reason:  "A negative bound is a usage mistake naming the flag, not a reporter that drops everything.",
			Args:    append(slices.Clone(local), "--max-claims=-1"),
			WantErr: "--max-claims=-1: want 0 (the default) or more",
			Usage:   true,
		},
		"BudgetShareAboveOne": {
			Reason:  "A share is of the workspaces: more than all of them is a mistake naming the flag.",
			Args:    append(slices.Clone(local), "--restart-budget-share", "1.5"),
			WantErr: "--restart-budget-share",
			Usage:   true,
		},
		"BudgetShareZero": {
			Reason:  "A share of zero would write no directive ever (and reporter.New would take it for the default): a mistake naming the flag.",
			Args:    append(slices.Clone(local), "--idle-budget-share", "0"),
			WantErr: "--idle-budget-share",
			Usage:   true,
		},
		"BudgetIntervalZero": {
			Reason:  "No interval at all is not one the reporter could keep, nor its default: a mistake naming the flag.",
			Args:    append(slices.Clone(local), "--restart-min-interval", "0s"),
			WantErr: "--restart-min-interval",
			Usage:   true,
		},
		"BudgetRaised": {
			Reason: "A planned fleet-wide rollout raises the budget: every workspace at once, a second apart.",
			Args:   append(slices.Clone(local), "--restart-budget-share", "1", "--restart-min-interval", "1s"),
		},
		"MissingTokenFile": {
			Reason: "The token's Secret is optional: a missing token file must not stop the sidecar, or the hook pod never becomes Ready.",
			Args:   append(slices.Clone(local), "--token-file", filepath.Join(dir, "nope")),
		},
		"MissingKubeconfig": {
			Reason:  "A --kubeconfig that cannot be read is a mistake reported at start, not a reporter that silently writes nothing.",
			Args:    append(slices.Clone(local), "--kubeconfig", filepath.Join(dir, "nope")),
			WantErr: "--kubeconfig",
		},
		"DeprecatedShutdownGrace": {
			Reason: "The old name --shutdown-grace still sets the shutdown timeout, with a warning naming the new one.",
			Args:   append(slices.Clone(local), "--shutdown-grace", "1s"),
			Stderr: []string{"flag --shutdown-grace is deprecated; use --shutdown-timeout"},
		},
		"UnreadableTokenFile": {
			Reason:  "A token path that exists but is not a readable file is a broken pod spec, reported at start.",
			Args:    append(slices.Clone(local), "--token-file", dir),
			WantErr: "--token-file",
		},
	})
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
