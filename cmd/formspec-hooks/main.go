// Command formspec-hooks is the FormSpec hook server for Metacontroller and
// the offline tools that share its code: render and claim.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/formspec/formspec-hooks/internal/cliflag"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// commandOrder is the order of the usage's command list.
var commandOrder = []string{"serve", "render", "claim", "version"}

func commands() map[string]command {
	return map[string]command{
		"serve":   {"run the hook server", runServe},
		"render":  {"print what the Workspace hook would produce, offline", runRender},
		"claim":   {"make keys, sign and verify ResourceClaims, and digest them for revocation (kubectl: rclaim)", runClaim},
		"version": {"print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code (see
// cliflag.Exit).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		return cliflag.Exit(stderr, program, &cliflag.UsageError{Command: program, Err: fmt.Errorf("missing command; one of %v", commandOrder)})
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
		return cliflag.Exit(stderr, program, &cliflag.UsageError{Command: program, Err: fmt.Errorf("unknown command %q", args[0])})
	}
	return cliflag.Exit(stderr, program+" "+args[0], cmd.run(ctx, args[1:], stdin, stdout, stderr))
}

const program = "formspec-hooks"

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: formspec-hooks <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, name := range commandOrder {
		fmt.Fprintf(w, "  %-8s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'formspec-hooks <command> --help' for a command's flags.")
}

// runVersion is "formspec-hooks version".
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := cliflag.New(program+" version", "Usage: formspec-hooks version\n\nPrint the version, the VCS revision and the Go version of this build.\n")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	cliflag.PrintVersion(stdout, program)
	return nil
}
