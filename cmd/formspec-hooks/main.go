// Command formspec-hooks is the FormSpec hook server for Metacontroller and
// the offline tools that share its code: render and claim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":  {"run the hook server", runServe},
		"render": {"print what the Workspace hook would produce, offline", runRender},
		"claim":  {"sign, verify and make keys for ResourceClaims", runClaim},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "formspec-hooks: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdin, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "formspec-hooks %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: formspec-hooks <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, name := range []string{"serve", "render", "claim"} {
		if c, ok := cmds[name]; ok {
			fmt.Fprintf(w, "  %-8s %s\n", name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'formspec-hooks <command> --help' for a command's flags.")
}
