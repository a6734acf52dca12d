package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/hooks/buildinfo"
	"github.com/formspec/formspec-hooks/hooks/cliflag"
	"github.com/formspec/formspec-hooks/hooks/workspace"
)

func TestRunServeFlags(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Loopback port 0 and no delay, so the cases that get as far as serving
	// stop at once: the context is already cancelled.
	local := []string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--shutdown-delay", "0"}
	// Every case starts with a default version, which serve requires; a
	// later --default-version takes it back.
	version := []string{"--default-version", "1.8.2"}
	warm, err := warmCalls()
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason string
		args   []string
		want   error
		// wantErr is part of the error's text: the flag the case is
		// about, which the error must name.
		wantErr    string
		usage      bool
		wantStdout string
		wantStderr []string
	}{
		"Help": {
			reason:     "--help prints usage to stdout and reports flag.ErrHelp, which main turns into exit 0.",
			args:       []string{"--help"},
			want:       flag.ErrHelp,
			wantStdout: "Usage: formspec-hooks serve [flags]",
		},
		"UnknownFlag":        {reason: "An unknown flag is a usage error.", args: []string{"--nope"}, wantErr: "-nope", usage: true},
		"PositionalArgs":     {reason: "serve takes no arguments.", args: []string{"extra"}, wantErr: "extra", usage: true},
		"BadLogLevel":        {reason: "Log levels are checked.", args: []string{"--log-level", "loud"}, wantErr: "-log-level", usage: true},
		"BadLogFormat":       {reason: "Log formats are checked.", args: []string{"--log-format", "xml"}, wantErr: "-log-format", usage: true},
		"BadReporterURL":     {reason: "The reporter URL must be usable.", args: []string{"--reporter-url", "127.0.0.1:8090"}, wantErr: "--reporter-url", usage: true},
		"BadClusterControl":  {reason: "A set Cluster Control URL must be usable.", args: []string{"--cluster-control-url", "ftp://x"}, wantErr: "--cluster-control-url", usage: true},
		"BadDeprecatedAlias": {reason: "The deprecated --control-cluster-url sets the same value, is checked the same way, and its error names the flag given.", args: []string{"--control-cluster-url", "ftp://x"}, wantErr: "--control-cluster-url", usage: true},
		"ImageDigest":        {reason: "Hooks append a tag, so a digest cannot work.", args: []string{"--resource-image", "r/img@sha256:abc"}, wantErr: "--resource-image", usage: true},
		"ZeroBodyLimit":      {reason: "A zero body limit would reject every request.", args: []string{"--max-body-bytes", "0"}, wantErr: "--max-body-bytes", usage: true},
		"NegativeInFlight":   {reason: "A negative in-flight limit means nothing.", args: []string{"--max-inflight", "-1"}, wantErr: "--max-inflight", usage: true},
		"CertWithoutKey":     {reason: "TLS needs both files.", args: []string{"--tls-cert-file", "tls.crt"}, wantErr: "--tls-key-file", usage: true},
		"NegativeBytes":      {reason: "A negative byte budget means nothing.", args: []string{"--max-inflight-bytes", "-1"}, wantErr: "--max-inflight-bytes", usage: true},
		"ZeroObjects":        {reason: "A zero object limit would reject every request.", args: []string{"--max-objects", "0"}, wantErr: "--max-objects", usage: true},
		"ZeroBodyTimeout":    {reason: "No time to read a body would reject every request.", args: []string{"--body-timeout", "0"}, wantErr: "--body-timeout", usage: true},
		"ZeroConnections":    {reason: "No connections would serve nobody.", args: []string{"--max-connections-per-client", "0"}, wantErr: "--max-connections-per-client", usage: true},
		"ZeroConnectionAge":  {reason: "A connection retired before its first answer would serve nobody.", args: []string{"--max-connection-age", "0"}, wantErr: "--max-connection-age", usage: true},
		"NoVersion":          {reason: "Without --default-version or a tag in --resource-image serve refuses to start rather than run latest.", args: []string{"--default-version", ""}, want: workspace.ErrNoVersion, usage: true},
		"TaggedImage":        {reason: "A tag in --resource-image is a version too.", args: append(append([]string{}, local...), "--default-version", "", "--resource-image", "r/img:2.0"), wantStderr: []string{"formspec-hooks starting"}},
		"NoReporter": {
			reason:     "An empty --reporter-url (the chart's reporter.enabled false) serves with nothing handed off.",
			args:       append(append([]string{}, local...), "--reporter-url", ""),
			wantStderr: []string{"no --reporter-url: nothing is handed off for Cluster Control"},
		},
		"ClientCAWithoutTLS": {
			reason:  "Client certificates need TLS.",
			args:    []string{"--tls-client-ca-file", "ca.crt"},
			wantErr: "--tls-client-ca-file",
			usage:   true,
		},
		"MissingTokenFile": {reason: "A missing token file stops the server at start.", args: []string{"--auth-token-file", filepath.Join(t.TempDir(), "nope")}, wantErr: "--auth-token-file"},
		"ServesAndStops": {
			reason: "Valid flags serve until the context ends, then stop cleanly.",
			args:   append(append([]string{}, local...), "--auth-token-file", tokens, "--log-format", "json", "--cluster-control-url", "https://control.example"),
			wantStderr: []string{`"msg":"formspec-hooks starting","version":"` + buildinfo.Release() + `"`,
				// Before it listens, it calls every hook once (warmup.go).
				fmt.Sprintf(`"msg":"hooks warmed up","calls":%d,`, len(warm))},
		},
		"DeprecatedAliasServes": {
			reason:     "The old flag name still works, with a warning naming the new one.",
			args:       append(append([]string{}, local...), "--control-cluster-url", "https://control.example"),
			wantStderr: []string{"flag --control-cluster-url is deprecated; use --cluster-control-url"},
		},
		"NoClusterControl": {
			reason:     "Without a Cluster Control URL the server still serves, and says what workspaces will get.",
			args:       local,
			wantStderr: []string{"no --cluster-control-url: workspaces get an empty CONTROL_CLUSTER_URL"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			err := runServe(ctx, append(append([]string{}, version...), tc.args...), strings.NewReader(""), &stdout, &stderr)
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
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("%s\nstderr lacks %q:\n%s", tc.reason, w, stderr.String())
				}
			}
			if diff := cmp.Diff(true, strings.Contains(stdout.String(), tc.wantStdout)); diff != "" {
				t.Errorf("%s\nstdout contains %q: -want, +got:\n%s\nstdout: %s", tc.reason, tc.wantStdout, diff, stdout.String())
			}
		})
	}
}
