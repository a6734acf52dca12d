package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/formspec/formspec-hooks/internal/filereload"
)

// reported is an error already written as a log line: Exit writes nothing
// more and returns code.
type reported struct {
	err  error
	code int
}

func (r *reported) Error() string { return r.err.Error() }
func (r *reported) Unwrap() error { return r.err }

// Report makes err, the error a long-running command exits with, a log
// line when the command logs JSON: under --log-format json everything the
// command writes to stderr is a JSON line, so that a log pipeline keeps the
// one that says why the process stopped. The line is at level ERROR, with
// the command, the error under "err" and, for a usage error, the hint to
// --help. The error returned makes Exit write nothing more and exit with
// the code err calls for (2 for a usage error, else 1).
//
// args are the command's arguments: a usage error can come before
// --log-format is parsed, so they are looked at too. Under the text format,
// and for nil or flag.ErrHelp, err is returned as it is.
func (l *Logging) Report(stderr io.Writer, command string, args []string, err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) || (l.format != "json" && !asksForJSON(args)) {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if ue, ok := errors.AsType[*UsageError](err); ok {
		log.Error("invalid command line", "command", ue.Command, "err", ue.Err.Error(), "hint", fmt.Sprintf("run '%s --help' for usage", ue.Command))
		return &reported{err: err, code: 2}
	}
	log.Error("exiting", "command", command, "err", err.Error())
	return &reported{err: err, code: 1}
}

// asksForJSON reports whether args set --log-format json, in any of the
// spellings the flag package accepts, the last one winning as it does,
// before a "--" that ends the flags.
func asksForJSON(args []string) bool {
	json := false
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "log-format" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		json = value == "json"
	}
	return json
}

// FileError rewrites an error about credentials files read through
// filereload so that it names the flags that gave the files and their
// values ("cannot load --tls-cert-file tls.crt and --tls-key-file tls.key:
// ..."), not the name logs and metrics know them by. Errors of other
// files, or of files no flag of fs set, are returned as they are.
func FileError(fs *flag.FlagSet, err error) error {
	fe, ok := errors.AsType[*filereload.Error](err)
	if !ok {
		return err
	}
	var flags []string
	fs.Visit(func(f *flag.Flag) {
		if v := f.Value.String(); v != "" && slices.Contains(fe.Paths, v) {
			flags = append(flags, "--"+f.Name+" "+v)
		}
	})
	if len(flags) == 0 {
		return err
	}
	return fmt.Errorf("cannot %s %s: %w", fe.Op, strings.Join(flags, " and "), fe.Err)
}
