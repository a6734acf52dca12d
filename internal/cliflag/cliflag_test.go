package cliflag

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		reason     string
		args       []string
		version    bool
		want       error
		wantUsage  string
		wantStdout string
	}{
		"OK":          {reason: "Good flags print nothing.", args: []string{"--n", "3"}},
		"Help":        {reason: "--help prints the header and the flags on stdout.", args: []string{"--help"}, want: flag.ErrHelp, wantStdout: "Usage: demo\n  -n int\n    \ta number (default 1)\n"},
		"ShortHelp":   {reason: "-h is --help.", args: []string{"-h"}, want: flag.ErrHelp, wantStdout: "Usage: demo\n  -n int\n    \ta number (default 1)\n"},
		"UnknownFlag": {reason: "An unknown flag is a usage error and prints nothing.", args: []string{"--nope"}, wantUsage: "demo: flag provided but not defined: -nope"},
		"BadValue":    {reason: "A value that does not parse is a usage error.", args: []string{"--n", "x"}, wantUsage: `demo: invalid value "x" for flag -n: parse error`},
		"NoVersion":   {reason: "Without AddVersion, `version` is an ordinary argument.", args: []string{"version"}},
		"Version":     {reason: "--version prints the version and answers like --help.", args: []string{"--version"}, version: true, want: flag.ErrHelp, wantStdout: "demo " + buildinfo.Release() + " ("},
		"VersionWord": {reason: "`version` alone is --version.", args: []string{"version"}, version: true, want: flag.ErrHelp, wantStdout: "demo " + buildinfo.Release() + " ("},
		"VersionMore": {reason: "`version` with more arguments is left to the command.", args: []string{"version", "x"}, version: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := New("demo", "Usage: demo\n")
			fs.Int("n", 1, "a number")
			if tc.version {
				AddVersion(fs)
			}
			var stdout bytes.Buffer
			err := Parse(fs, tc.args, &stdout)
			var gotUsage string
			if ue, ok := errors.AsType[*UsageError](err); ok {
				gotUsage, err = ue.Command+": "+ue.Err.Error(), nil
			}
			if diff := cmp.Diff(tc.wantUsage, gotUsage); diff != "" {
				t.Errorf("%s\nParse(%q) usage error: -want, +got:\n%s", tc.reason, tc.args, diff)
			}
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nParse(%q): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
			if got := stdout.String(); !strings.HasPrefix(got, tc.wantStdout) || (tc.wantStdout == "" && got != "") {
				t.Errorf("%s\nstdout: got %q, want it to start with %q", tc.reason, got, tc.wantStdout)
			}
		})
	}
}

func TestExit(t *testing.T) {
	cases := map[string]struct {
		reason     string
		err        error
		wantCode   int
		wantStderr string
	}{
		"OK":    {reason: "Success is 0 and silent.", err: nil, wantCode: 0},
		"Help":  {reason: "Help was printed already: 0 and silent.", err: flag.ErrHelp, wantCode: 0},
		"Usage": {reason: "A usage error is 2, the error first, then where to get help.", err: fmt.Errorf("wrapped: %w", &UsageError{Command: "tool sub", Err: errors.New("unexpected arguments")}), wantCode: 2, wantStderr: "tool sub: unexpected arguments\nRun 'tool sub --help' for usage.\n"},
		"Other": {reason: "Any other failure is 1, one line.", err: errors.New("cannot listen"), wantCode: 1, wantStderr: "tool: cannot listen\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := Exit(&stderr, "tool", tc.err)
			if diff := cmp.Diff(tc.wantCode, code); diff != "" {
				t.Errorf("%s\nexit code: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr.String()); diff != "" {
				t.Errorf("%s\nstderr: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLogging(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		// wantUsage is the flag a *UsageError must name; empty when the
		// arguments are good.
		wantUsage string
		// want is what an Info and a Debug line print.
		want string
	}{
		"Defaults":  {reason: "info and text by default: the debug line is dropped.", want: "level=INFO msg=hello\n"},
		"DebugJSON": {reason: "Both flags apply.", args: []string{"--log-level", "debug", "--log-format", "json"}, want: `{"level":"INFO","msg":"hello"}` + "\n" + `{"level":"DEBUG","msg":"detail"}` + "\n"},
		"Warn":      {reason: "Upper case levels are accepted too, as slog spells them.", args: []string{"--log-level", "WARN"}, want: ""},
		"BadLevel":  {reason: "An unknown level is a usage error.", args: []string{"--log-level", "loud"}, wantUsage: "log-level"},
		"BadFormat": {reason: "An unknown format is a usage error.", args: []string{"--log-format", "xml"}, wantUsage: "log-format"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := New("demo", "")
			l := AddLogging(fs)
			err := Parse(fs, tc.args, &bytes.Buffer{})
			if usage, ok := errors.AsType[*UsageError](err); ok != (tc.wantUsage != "") || err != nil && !ok {
				t.Fatalf("%s\nParse: got %v, want a usage error naming %q", tc.reason, err, tc.wantUsage)
			} else if ok {
				if !strings.Contains(usage.Error(), tc.wantUsage) {
					t.Errorf("%s\nParse: got %v, want a usage error naming %q", tc.reason, err, tc.wantUsage)
				}
				return
			}
			var out bytes.Buffer
			log := l.Logger(&out)
			// Without times, so that the output is comparable.
			log = slog.New(withoutTime{log.Handler()})
			log.Info("hello")
			log.Debug("detail")
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\nlog output: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// withoutTime drops the record's time, which text and JSON handlers omit
// when it is zero.
type withoutTime struct{ slog.Handler }

func (h withoutTime) Handle(ctx context.Context, r slog.Record) error {
	return h.Handler.Handle(ctx, slog.NewRecord(time.Time{}, r.Level, r.Message, r.PC))
}

func TestRunAll(t *testing.T) {
	boom := errors.New("boom")
	cases := map[string]struct {
		reason string
		parts  []func(context.Context) error
		want   error
	}{
		"OneFails": {
			reason: "A failing part stops the others, and its error is returned.",
			parts:  []func(context.Context) error{waitForCancel, func(context.Context) error { return boom }},
			want:   boom,
		},
		"OneReturns": {
			reason: "A part that returns nil early stops the others too.",
			parts:  []func(context.Context) error{waitForCancel, func(context.Context) error { return nil }},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := RunAll(context.Background(), tc.parts...)
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nRunAll: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func waitForCancel(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
