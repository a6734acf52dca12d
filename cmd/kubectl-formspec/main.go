// Command kubectl-formspec is the kubectl plugin of the FormSpec operator:
// `kubectl formspec trace` shows a Workspace, ResourceClaim or Datastore
// as the tree of everything it is made of, with what keeps each part from
// being Ready, `kubectl formspec diff` previews what this version of the
// hooks would change in the live Workspaces before an upgrade, and
// `kubectl formspec takeover` takes a cluster over from the original
// FormSpec operator (docs/migrating.md).
//
// kubectl runs it for `kubectl formspec ...` when it is on the PATH under
// this name. The connection flags (--kubeconfig, --context, -n, ...) are
// kubectl's own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/formspec/formspec-hooks/internal/cliflag"
)

// program is the binary's name; kubectl calls it as "kubectl formspec".
const program = "kubectl-formspec"

// command is how kubectl users type the plugin, and how its messages name
// it.
const command = "kubectl formspec"

// Exit codes. A usage mistake is 2, as on every command of this project;
// a finding (not Ready, would change) is 1, as kubectl diff has it, so
// that a failure to find out is 3.
const (
	exitFinding = 1
	exitFailed  = 3
)

// errFinding is what a command returns after printing a finding that its
// exit code reports: trace found something not Ready, diff --exit-code
// found a change.
var errFinding = errors.New("finding")

type subcommand struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commandOrder is the order of the usage's command list.
var commandOrder = []string{"trace", "diff", "takeover", "version"}

func commands() map[string]subcommand {
	return map[string]subcommand{
		"trace":    {"show a Workspace, ResourceClaim (rclaim) or Datastore as a tree, with what keeps each part from being Ready", runTrace},
		"diff":     {"preview what this version's hooks would change in the live Workspaces", runDiff},
		"takeover": {"take Workspaces over from the original FormSpec operator: prepare, then roll", runTakeover},
		"version":  {"print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		return exit(stderr, command, &cliflag.UsageError{Command: command, Err: fmt.Errorf("missing command; one of %v", commandOrder)})
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout, cmds)
		return 0
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return exit(stderr, command, &cliflag.UsageError{Command: command, Err: fmt.Errorf("unknown command %q", args[0])})
	}
	return exit(stderr, command+" "+args[0], cmd.run(ctx, args[1:], stdout, stderr))
}

// exit reports err the project's way (cliflag.Exit) and returns the exit
// code: 0, 1 for a finding the output already shows, 2 for a usage
// mistake, 3 for a failure.
func exit(stderr io.Writer, command string, err error) int {
	if errors.Is(err, errFinding) {
		return exitFinding
	}
	if code := cliflag.Exit(stderr, command, err); code != 1 {
		return code
	}
	return exitFailed
}

func usage(w io.Writer, cmds map[string]subcommand) {
	fmt.Fprintln(w, "Usage: kubectl formspec <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, name := range commandOrder {
		fmt.Fprintf(w, "  %-9s %s\n", name, cmds[name].summary)
	}
	fmt.Fprint(w, "\nRun 'kubectl formspec <command> --help' for a command's flags.\n"+exitCodes)
}

// exitCodes ends every usage text.
const exitCodes = `
Exit status: 0 when all is well; 1 when trace finds something not Ready,
diff --exit-code finds a change, or takeover prepare finds an object at a
Workspace's child's name that is not the Workspace's; 2 for a usage
mistake; 3 when the command could not find out or do its work (the API
server cannot be reached, an object cannot be read or written, a takeover
roll stopped).
`

// runVersion is "kubectl formspec version".
func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	f := newFlags(command+" version", "Usage: kubectl formspec version\n\nPrint the version, the VCS revision and the Go version of this build.\n", false)
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	cliflag.PrintVersion(stdout, program)
	return nil
}
