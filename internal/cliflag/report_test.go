package cliflag

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/filereload"
)

// TestReport: under --log-format json the error a command exits with is
// one JSON line and Exit writes nothing more, with the exit code of the
// error; under text Exit reports it as always.
func TestReport(t *testing.T) {
	type line struct {
		Level, Msg, Command, Err, Hint string
	}
	cases := map[string]struct {
		reason string
		args   []string
		err    error
		want   *line // nil: Exit's text
		code   int
	}{
		"JSONUsage": {
			reason: "A usage error under json: a JSON line with the hint, exit 2.",
			args:   []string{"--log-format", "json", "--port", "x"},
			err:    &UsageError{Command: "cmd sub", Err: errors.New("bad --port")},
			want:   &line{Level: "ERROR", Msg: "invalid command line", Command: "cmd sub", Err: "bad --port", Hint: "run 'cmd sub --help' for usage"},
			code:   2,
		},
		"JSONFailure": {
			reason: "Any other error under json: a JSON line, exit 1.",
			args:   []string{"--log-format=json"},
			err:    errors.New("cannot listen"),
			want:   &line{Level: "ERROR", Msg: "exiting", Command: "cmd sub", Err: "cannot listen"},
			code:   1,
		},
		"JSONBeforeParse": {
			reason: "A flag that fails before --log-format is parsed: the arguments still ask for json.",
			args:   []string{"--nope", "-log-format", "json"},
			err:    &UsageError{Command: "cmd sub", Err: errors.New("flag provided but not defined: -nope")},
			want:   &line{Level: "ERROR", Msg: "invalid command line", Command: "cmd sub", Err: "flag provided but not defined: -nope", Hint: "run 'cmd sub --help' for usage"},
			code:   2,
		},
		"LastWins": {
			reason: "As in the flag package, the last --log-format counts.",
			args:   []string{"--log-format", "json", "--log-format", "text"},
			err:    errors.New("cannot listen"),
			code:   1,
		},
		"AfterDashDash": {
			reason: "An argument after -- is no flag.",
			args:   []string{"--", "--log-format", "json"},
			err:    errors.New("cannot listen"),
			code:   1,
		},
		"Text": {
			reason: "Under text, Exit writes its line.",
			err:    errors.New("cannot listen"),
			code:   1,
		},
		"Help": {
			reason: "Help asked for is no error.",
			args:   []string{"--log-format", "json"},
			err:    flag.ErrHelp,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			l := &Logging{format: "text"}
			code := Exit(&stderr, "cmd sub", l.Report(&stderr, "cmd sub", tc.args, tc.err))
			if diff := cmp.Diff(tc.code, code); diff != "" {
				t.Errorf("%s\nexit code: -want, +got:\n%s", tc.reason, diff)
			}
			var got *line
			if json.Valid(stderr.Bytes()) {
				got = new(line)
				if err := json.Unmarshal(stderr.Bytes(), got); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstderr %q: -want, +got:\n%s", tc.reason, stderr.String(), diff)
			}
			if tc.want == nil && tc.code != 0 && !bytes.HasPrefix(stderr.Bytes(), []byte("cmd sub: ")) {
				t.Errorf("%s\nstderr %q, want Exit's text line", tc.reason, stderr.String())
			}
		})
	}
}

// TestFileError: an error about credentials files names the flags that
// gave them, with their values, instead of the files' internal name.
func TestFileError(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, p := range []string{cert, key} {
		if err := os.WriteFile(p, []byte("not PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pairErr := filereload.NewKeyPair(cert, key, filereload.Options{Name: "tls-serving-pair"}).Err()
	missingErr := filereload.NewTokens(filepath.Join(dir, "missing"), filereload.Options{Name: "auth-tokens"}).Err()
	cases := map[string]struct {
		reason string
		args   []string
		err    error
		want   string
	}{
		"Pair": {
			reason: "Both flags of a pair, in order, and the cause.",
			args:   []string{"--key", key, "--cert", cert},
			err:    pairErr,
			want:   "cannot load --cert " + cert + " and --key " + key + ": tls: failed to find any PEM data in certificate input",
		},
		"Missing": {
			reason: "A file that cannot be read.",
			args:   []string{"--tokens", filepath.Join(dir, "missing")},
			err:    missingErr,
			want:   "cannot read --tokens " + filepath.Join(dir, "missing") + ": stat " + filepath.Join(dir, "missing") + ": no such file or directory",
		},
		"NoFlag": {
			reason: "Files no flag set keep their error.",
			err:    missingErr,
			want:   missingErr.Error(),
		},
		"Other": {
			reason: "Other errors are left alone.",
			args:   []string{"--cert", cert},
			err:    errors.New("cannot listen"),
			want:   "cannot listen",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := New("cmd", "")
			fs.String("cert", "", "")
			fs.String("key", "", "")
			fs.String("tokens", "", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := FileError(fs, tc.err)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("%s\nFileError(): -want, +got:\n%s", tc.reason, diff)
			}
			if !errors.Is(got, errors.Unwrap(tc.err)) && errors.Unwrap(tc.err) != nil {
				t.Errorf("%s\nFileError() lost the cause", tc.reason)
			}
		})
	}
}
