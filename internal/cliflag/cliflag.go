// Package cliflag holds the command-line conventions every command of this
// project follows, so that the three binaries behave alike:
//
//   - --help (or -h) prints the usage to stdout and the command exits 0;
//   - a usage error (an unknown flag, a bad value, a stray argument) is
//     printed first, on stderr, with a pointer to --help, and the command
//     exits 2; the flag list is not dumped on the user;
//   - any other failure is one line on stderr and exit 1;
//   - --log-level and --log-format mean the same everywhere, and under
//     --log-format json the error a command exits with is a JSON line too
//     (Logging.Report);
//   - `--version` (and `version`) print the build's version and exit 0.
//
// The flag package itself prints nothing: Parse and Exit do the reporting,
// once.
package cliflag

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
)

// UsageError is a command called the wrong way. Exit reports it with exit
// code 2, as the flag package and most Unix tools do.
type UsageError struct {
	// Command is the full command, e.g. "formspec-hooks claim sign".
	Command string
	Err     error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError of fs's command.
func Usagef(fs *flag.FlagSet, format string, args ...any) error {
	return &UsageError{Command: fs.Name(), Err: fmt.Errorf(format, args...)}
}

// New returns a flag set for command (its full name, e.g.
// "formspec-hooks serve") whose --help prints header followed by the flags.
// Parse it with Parse.
func New(command, header string) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), header)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args. A help request prints the usage to stdout and returns
// flag.ErrHelp, as does a version request (see AddVersion) after printing
// the version: either way the command has answered and exits 0. A flag
// that does not parse is a *UsageError; nothing else is printed.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		PrintUsage(stdout, fs)
		return flag.ErrHelp
	}
	if err != nil {
		return &UsageError{Command: fs.Name(), Err: err}
	}
	if f := fs.Lookup(versionFlag); f != nil {
		if v, ok := f.Value.(*versionValue); ok && (bool(*v) || (fs.NArg() == 1 && fs.Arg(0) == "version")) {
			PrintVersion(stdout, fs.Name())
			return flag.ErrHelp
		}
	}
	return nil
}

// NoArgs is a UsageError when fs was given positional arguments.
func NoArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return Usagef(fs, "unexpected arguments %q", fs.Args())
	}
	return nil
}

// PrintUsage prints fs's usage to w.
func PrintUsage(w io.Writer, fs *flag.FlagSet) {
	fs.SetOutput(w)
	fs.Usage()
	fs.SetOutput(io.Discard)
}

// Exit reports err the project's way and returns the exit code: 0 for nil
// and for flag.ErrHelp (help or version was asked for and printed), 2 for a
// *UsageError, printed first with a pointer to --help, and 1 for anything
// else, printed as "command: error". An error Logging.Report already wrote
// as a log line is not written again.
func Exit(stderr io.Writer, command string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if r, ok := errors.AsType[*reported](err); ok {
		// Already written, as a log line (Logging.Report).
		return r.code
	}
	if ue, ok := errors.AsType[*UsageError](err); ok {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", ue.Command, ue.Err, ue.Command)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", command, err)
	return 1
}

const versionFlag = "version"

// versionValue is the --version flag; Parse looks for it by type, so that
// only commands that called AddVersion answer `version`.
type versionValue bool

func (v *versionValue) String() string { return fmt.Sprint(bool(*v)) }
func (v *versionValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	*v = versionValue(b)
	return err
}
func (v *versionValue) IsBoolFlag() bool { return true }

// AddVersion makes fs answer --version, and `version` as its only
// argument, with the build's version (see Parse).
func AddVersion(fs *flag.FlagSet) {
	fs.Var(new(versionValue), versionFlag, "print the version and exit")
}

// PrintVersion prints "<program> <version>" for the running binary; program
// is the first word of command.
func PrintVersion(w io.Writer, command string) {
	program, _, _ := strings.Cut(command, " ")
	fmt.Fprintf(w, "%s %s\n", program, buildinfo.Get())
}

// Logging is the --log-level and --log-format pair every long-running
// command has.
type Logging struct {
	level  slog.Level
	format string
}

// AddLogging registers --log-level (default info) and --log-format
// (default text) on fs. Bad values are usage errors at Parse.
func AddLogging(fs *flag.FlagSet) *Logging {
	l := &Logging{format: "text"}
	fs.Func("log-level", "minimum `level` logged: debug, info, warn or error (default info)", func(s string) error {
		return l.level.UnmarshalText([]byte(s))
	})
	fs.Func("log-format", "`format` of log lines: text or json (default text)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("want text or json")
		}
		l.format = s
		return nil
	})
	return l
}

// Logger returns a logger writing to w at the chosen level and format.
func (l *Logging) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.level}
	if l.format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// RunAll runs every part of a long-running command until ctx is done or
// one part returns, then stops the rest and returns the first error: a
// process that lost one of its listeners or loops is better restarted
// whole than kept half up.
func RunAll(ctx context.Context, parts ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for _, part := range parts {
		g.Go(func() error {
			defer cancel()
			return part(ctx)
		})
	}
	return g.Wait()
}
