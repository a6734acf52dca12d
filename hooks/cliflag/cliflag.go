// Package cliflag parses a command's flags the way every command of this
// project does: usage asked for with -h/--help goes to stdout (and the
// caller exits 0 on flag.ErrHelp), usage after a mistake goes to stderr,
// and the flag package itself prints nothing, so the caller reports the
// error once.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// New returns a flag set that prints nothing by itself; parse it with Parse.
func New(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args. On failure it prints header and the flags' defaults,
// to stdout for a help request and to stderr otherwise, and returns the
// error (flag.ErrHelp for a help request).
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, header string) error {
	err := fs.Parse(args)
	if err == nil {
		return nil
	}
	out := stderr
	if errors.Is(err, flag.ErrHelp) {
		out = stdout
	}
	Usage(out, fs, header)
	return err
}

// Usage prints header, then the flags' defaults in the flag package's
// layout.
func Usage(w io.Writer, fs *flag.FlagSet, header string) {
	fmt.Fprint(w, header)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
