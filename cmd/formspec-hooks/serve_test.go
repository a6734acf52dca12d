package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/testkit/clitest"
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

	clitest.Run(t, "Usage: formspec-hooks serve [flags]", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runServe(ctx, append(slices.Clone(version), args...), strings.NewReader(""), stdout, stderr)
	}, map[string]clitest.Case{
		"Help": {
			Reason:  "--help prints usage to stdout and reports flag.ErrHelp, which main turns into exit 0.",
			Args:    []string{"--help"},
			Want:    flag.ErrHelp,
			UsageOn: "stdout",
		},
		"UnknownFlag":        {Reason: "An unknown flag is a usage error.", Args: []string{"--nope"}, WantErr: "-nope", Usage: true},
		"PositionalArgs":     {Reason: "serve takes no arguments.", Args: []string{"extra"}, WantErr: "extra", Usage: true},
		"BadLogLevel":        {Reason: "Log levels are checked.", Args: []string{"--log-level", "loud"}, WantErr: "-log-level", Usage: true},
		"BadLogFormat":       {Reason: "Log formats are checked.", Args: []string{"--log-format", "xml"}, WantErr: "-log-format", Usage: true},
		"BadReporterURL":     {Reason: "The reporter URL must be usable.", Args: []string{"--reporter-url", "127.0.0.1:8090"}, WantErr: "--reporter-url", Usage: true},
		"BadClusterControl":  {Reason: "A set Cluster Control URL must be usable.", Args: []string{"--cluster-control-url", "ftp://x"}, WantErr: "--cluster-control-url", Usage: true},
		"BadDeprecatedAlias": {Reason: "The deprecated --control-cluster-url sets the same value, is checked the same way, and its error names the flag given.", Args: []string{"--control-cluster-url", "ftp://x"}, WantErr: "--control-cluster-url", Usage: true},
		"ImageDigest":        {Reason: "Hooks append a tag, so a digest cannot work.", Args: []string{"--resource-image", "r/img@sha256:abc"}, WantErr: "--resource-image", Usage: true},
		"ZeroBodyLimit":      {Reason: "A zero body limit would reject every request.", Args: []string{"--max-body-bytes", "0"}, WantErr: "--max-body-bytes", Usage: true},
		"NegativeInFlight":   {Reason: "A negative in-flight limit means nothing.", Args: []string{"--max-inflight", "-1"}, WantErr: "--max-inflight", Usage: true},
		"CertWithoutKey":     {Reason: "TLS needs both files.", Args: []string{"--tls-cert-file", "tls.crt"}, WantErr: "--tls-key-file", Usage: true},
		"NegativeBytes":      {Reason: "A negative byte budget means nothing.", Args: []string{"--max-inflight-bytes", "-1"}, WantErr: "--max-inflight-bytes", Usage: true},
		"ZeroObjects":        {Reason: "A zero object limit would reject every request.", Args: []string{"--max-objects", "0"}, WantErr: "--max-objects", Usage: true},
		"ZeroBodyTimeout":    {Reason: "No time to read a body would reject every request.", Args: []string{"--body-timeout", "0"}, WantErr: "--body-timeout", Usage: true},
		"ZeroConnections":    {Reason: "No connections would serve nobody.", Args: []string{"--max-connections-per-client", "0"}, WantErr: "--max-connections-per-client", Usage: true},
		"ZeroConnectionAge":  {Reason: "A connection retired before its first answer would serve nobody.", Args: []string{"--max-connection-age", "0"}, WantErr: "--max-connection-age", Usage: true},
		"NoVersion":          {Reason: "Without --default-version or a tag in --resource-image serve refuses to start rather than run latest.", Args: []string{"--default-version", ""}, Want: workspace.ErrNoVersion, Usage: true},
		"TaggedImage":        {Reason: "A tag in --resource-image is a version too.", Args: append(append([]string{}, local...), "--default-version", "", "--resource-image", "r/img:2.0"), Stderr: []string{"formspec-hooks starting"}},
		"NoReporter": {
			Reason: "An empty --reporter-url (the chart's reporter.enabled false) serves with nothing handed off.",
			Args:   append(append([]string{}, local...), "--reporter-url", ""),
			Stderr: []string{"no --reporter-url: nothing is handed off for Cluster Control"},
		},
		"ClientCAWithoutTLS": {
			Reason:  "Client certificates need TLS.",
			Args:    []string{"--tls-client-ca-file", "ca.crt"},
			WantErr: "--tls-client-ca-file",
			Usage:   true,
		},
		"MissingTokenFile": {Reason: "A missing token file stops the server at start.", Args: []string{"--auth-token-file", filepath.Join(t.TempDir(), "nope")}, WantErr: "--auth-token-file"},
		"ServesAndStops": {
			Reason: "Valid flags serve until the context ends, then stop cleanly.",
			Args:   append(append([]string{}, local...), "--auth-token-file", tokens, "--log-format", "json", "--cluster-control-url", "https://control.example"),
			Stderr: []string{`"msg":"formspec-hooks starting","version":"` + buildinfo.Release() + `"`,
				// Before it listens, it calls every hook once (warmup.go).
				fmt.Sprintf(`"msg":"hooks warmed up","calls":%d,`, len(warm))},
		},
		"DeprecatedAliasServes": {
			Reason: "The old flag name still works, with a warning naming the new one.",
			Args:   append(append([]string{}, local...), "--control-cluster-url", "https://control.example"),
			Stderr: []string{"flag --control-cluster-url is deprecated; use --cluster-control-url"},
		},
		"NoClusterControl": {
			Reason: "Without a Cluster Control URL the server still serves, and says what workspaces will get.",
			Args:   local,
			Stderr: []string{"no --cluster-control-url: workspaces get an empty CONTROL_CLUSTER_URL"},
		},
	})
}
