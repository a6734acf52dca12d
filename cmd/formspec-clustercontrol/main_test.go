package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/internal/testkit/clitest"
)

// TestHelpIsDocumented keeps docs/reporter.md's demo section identical to
// what --help prints.
func TestHelpIsDocumented(t *testing.T) {
	clitest.HelpIsDocumented(t, run, "../../docs/reporter.md", "formspec-clustercontrol")
}

func TestRun(t *testing.T) {
	adminTokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(adminTokens, []byte("admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clitest.Run(t, "Usage: formspec-clustercontrol [flags]", run, map[string]clitest.Case{
		"Help": {
			Reason:  "--help prints usage to stdout and reports flag.ErrHelp, which main turns into exit 0.",
			Args:    []string{"--help"},
			Want:    flag.ErrHelp,
			UsageOn: "stdout",
		},
		"UnknownFlag": {
			Reason:  "A mistake is a usage error, reported by main (exit 2) without the flag list.",
			Args:    []string{"--nope"},
			WantErr: "-nope",
			Usage:   true,
		},
		"MissingTokenFile": {
			Reason:  "A token file named must be there: without it, the server would accept anyone.",
			Args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "", "--auth-token-file", filepath.Join(t.TempDir(), "nope")},
			WantErr: "--auth-token-file",
		},
		"DeprecatedTokenFile": {
			Reason:  "The old name --token-file still sets the token file, with a warning naming the new one; its errors name the flag given.",
			Args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "", "--token-file", filepath.Join(t.TempDir(), "nope")},
			WantErr: "cannot read --token-file",
			Stderr:  []string{"flag --token-file is deprecated; use --auth-token-file"},
		},
		"MissingAdminTokenFile": {
			Reason:  "An admin token file named must be there.",
			Args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file", filepath.Join(t.TempDir(), "nope")},
			WantErr: "--admin-token-file",
		},
		"OffLoopbackWithoutToken": {
			Reason:  "An API anyone on the network reaches needs a token: a usage error naming --auth-token-file, before anything listens.",
			Args:    []string{"--listen", "0.0.0.0:0", "--admin-listen", ""},
			WantErr: "--auth-token-file",
			Usage:   true,
		},
		"AdminWithoutToken": {
			Reason:  "The admin API always needs a token: it decides what the reporter writes onto Workspaces.",
			Args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
			WantErr: "--admin-token-file",
			Usage:   true,
		},
		"NoBudget": {
			Reason:  "A server that may keep nothing is a mistake.",
			Args:    []string{"--listen", "127.0.0.1:0", "--admin-listen", "", "--max-stored-bytes", "0"},
			WantErr: "--max-stored-bytes",
			Usage:   true,
		},
		"ServesAndStops": {
			Reason: "Valid flags serve until the context ends, then stop cleanly.",
			Args:   []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file", adminTokens},
		},
		"OffLoopbackWithToken": {
			Reason: "With --auth-token-file the API may listen beyond the loopback.",
			Args:   []string{"--listen", "0.0.0.0:0", "--admin-listen", "", "--auth-token-file", adminTokens},
		},
		"LoopbackWithoutToken": {
			Reason: "On loopback the API may go without a token, as make run starts it.",
			Args:   []string{"--listen", "127.0.0.1:0", "--admin-listen", ""},
		},
	})
}
