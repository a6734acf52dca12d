package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/cliflag"
)

// TestCommandLine runs the plugin's commands the ways a user gets them
// wrong or asks for help, none of which needs a cluster: the exit code,
// what goes to stdout and what to stderr follow the project's conventions
// (internal/cliflag) with kubectl's flags.
func TestCommandLine(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		code   int
		// stdout and stderr must contain these; stderrPrefix must start it.
		stdout, stderr, stderrPrefix string
	}{
		"NoCommand":         {reason: "A bare plugin is a usage mistake.", args: nil, code: 2, stderrPrefix: "kubectl formspec: missing command"},
		"Help":              {reason: "--help lists the commands and the exit codes.", args: []string{"--help"}, code: 0, stdout: "Exit status: 0 when all is well; 1 when trace"},
		"HelpWord":          {reason: "help, as kubectl has it.", args: []string{"help"}, code: 0, stdout: "Usage: kubectl formspec <command>"},
		"UnknownCommand":    {reason: "An unknown command is named.", args: []string{"tarce"}, code: 2, stderrPrefix: `kubectl formspec: unknown command "tarce"`},
		"Version":           {reason: "--version prints the binary's name and version.", args: []string{"--version"}, code: 0, stdout: "kubectl-formspec "},
		"VersionWord":       {reason: "So does version.", args: []string{"version"}, code: 0, stdout: "kubectl-formspec "},
		"VersionStray":      {reason: "version takes no arguments.", args: []string{"version", "now"}, code: 2, stderrPrefix: "kubectl formspec version: unexpected arguments"},
		"TraceHelp":         {reason: "A command's --help shows kubectl's connection flags too.", args: []string{"trace", "--help"}, code: 0, stdout: "-n, --namespace string"},
		"TraceVersion":      {reason: "--version works on each command.", args: []string{"trace", "--version"}, code: 0, stdout: "kubectl-formspec "},
		"DiffHelp":          {reason: "diff documents that the hook server's flags must match the install.", args: []string{"diff", "--help"}, code: 0, stdout: "give the values of the install you\nare upgrading"},
		"DiffVersion":       {reason: "--version works on each command.", args: []string{"diff", "--version"}, code: 0, stdout: "kubectl-formspec "},
		"UnknownFlag":       {reason: "The mistake comes first, then where to look; no flag list is dumped.", args: []string{"trace", "--bogus", "ws/x"}, code: 2, stderrPrefix: "kubectl formspec trace: unknown flag: --bogus\nRun 'kubectl formspec trace --help' for usage.\n"},
		"LogLevel":          {reason: "The logging flags are the project's, checked at parse.", args: []string{"trace", "--log-level", "loud", "ws/x"}, code: 2, stderrPrefix: "kubectl formspec trace: invalid argument \"loud\" for \"--log-level\""},
		"LogFormat":         {reason: "--log-format is text or json.", args: []string{"diff", "--log-format", "xml"}, code: 2, stderr: "want text or json"},
		"DiffStray":         {reason: "diff takes no arguments.", args: []string{"diff", "ws/x"}, code: 2, stderrPrefix: "kubectl formspec diff: unexpected arguments"},
		"TakeoverHelp":      {reason: "takeover documents both steps and when to run each.", args: []string{"takeover", "--help"}, code: 0, stdout: "prepare: run once the original operator is stopped, before Metacontroller"},
		"TakeoverNoStep":    {reason: "takeover wants prepare or roll.", args: []string{"takeover"}, code: 2, stderrPrefix: "kubectl formspec takeover: want one of prepare or roll"},
		"TakeoverOtherStep": {reason: "An unknown step is named.", args: []string{"takeover", "adopt"}, code: 2, stderrPrefix: `kubectl formspec takeover: want one of prepare or roll, got ["adopt"]`},
		"TakeoverInFlight":  {reason: "A roll takes at least one workspace at a time.", args: []string{"takeover", "roll", "--max-in-flight", "0"}, code: 2, stderrPrefix: "kubectl formspec takeover: --max-in-flight must be at least 1"},
		"TakeoverNoManager": {reason: "prepare needs Metacontroller's field manager.", args: []string{"takeover", "prepare", "--field-manager", ""}, code: 2, stderrPrefix: "kubectl formspec takeover: --field-manager must not be empty"},
		"NoKubeconfig":      {reason: "A kubeconfig that cannot be read is a failure to find out, not a finding.", args: []string{"trace", "ws/x", "--kubeconfig", "/nonexistent/kubeconfig"}, code: 3, stderrPrefix: "kubectl formspec trace: "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) || !strings.HasPrefix(stderr.String(), tc.stderrPrefix) {
				t.Errorf("%s\n%v: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.reason, tc.args, code, tc.code, stdout.String(), stderr.String())
			}
			if tc.code == 0 && stderr.Len() > 0 {
				t.Errorf("%v: answered on stderr: %s", tc.args, stderr.String())
			}
			if tc.code == 2 && stdout.Len() > 0 {
				t.Errorf("%v: a usage mistake printed to stdout: %s", tc.args, stdout.String())
			}
		})
	}
}

// TestExit pins the exit codes the help text and the README promise.
func TestExit(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   int
	}{
		"OK":      {reason: "Success.", err: nil, want: 0},
		"Help":    {reason: "Help and version were asked for and printed.", err: flag.ErrHelp, want: 0},
		"Finding": {reason: "trace found something not Ready, diff --exit-code a change.", err: errFinding, want: 1},
		"Usage":   {reason: "A usage mistake.", err: &cliflag.UsageError{Command: "kubectl formspec trace", Err: errors.New("bad")}, want: 2},
		"Failure": {reason: "Anything else: above 1, as kubectl diff has it.", err: errors.New("connection refused"), want: 3},
	}
	got, want := map[string]int{}, map[string]int{}
	for name, tc := range cases {
		got[name] = exit(&bytes.Buffer{}, command, tc.err)
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exit codes: -want, +got:\n%s", diff)
	}
}

// TestNoCluster runs trace and diff where there is no cluster to talk to:
// no configuration at all, an API server address where nothing listens,
// and one where make run's hook server (no API server) answers. Each is
// one line of the plugin's, exit 3; client-go's discovery logged four or
// five lines of its own first, and with no configuration the plugin
// talked to localhost:8080, whatever answered there.
func TestNoCluster(t *testing.T) {
	home := t.TempDir()
	empty := filepath.Join(home, "empty-kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", empty)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	notAPI := httptest.NewServer(http.NotFoundHandler())
	defer notAPI.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"TraceNoConfig": {
			reason: "No kubeconfig, no --server: say so rather than try localhost:8080.",
			args:   []string{"trace", "ws/x"},
			want:   "kubectl formspec trace: no Kubernetes configuration: set KUBECONFIG or --kubeconfig, write ~/.kube/config, or give --server\n",
		},
		"DiffNoConfig": {
			reason: "The same for diff.",
			args:   []string{"diff", "--default-version", "1.8.2", "--cluster-control-url", "https://cc.example"},
			want:   "kubectl formspec diff: no Kubernetes configuration: set KUBECONFIG or --kubeconfig, write ~/.kube/config, or give --server\n",
		},
		"Unreachable": {
			reason: "Nothing listens at --server: one line naming it.",
			args:   []string{"trace", "ws/x", "--server", closed.URL},
			want:   "kubectl formspec trace: cannot reach the Kubernetes API server at " + closed.URL + ": ",
		},
		"NotAnAPIServer": {
			reason: "Something that is no API server answers 404: one line saying so.",
			args:   []string{"trace", "ws/x", "--server", notAPI.URL},
			want:   "kubectl formspec trace: " + notAPI.URL + " is not a Kubernetes API server: it answers GET /version with 404 Not Found; check --server, --context or the kubeconfig\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != exitFailed || !strings.HasPrefix(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("%s\n%v: exit %d (want %d), stderr (want one line starting %q):\n%s", tc.reason, tc.args, code, exitFailed, tc.want, stderr.String())
			}
		})
	}
}
