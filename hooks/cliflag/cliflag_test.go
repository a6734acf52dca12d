package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		reason     string
		args       []string
		wantErr    error
		wantStdout bool
		wantStderr bool
	}{
		"OK":      {reason: "Good flags print nothing.", args: []string{"--n", "3"}},
		"Help":    {reason: "--help prints usage on stdout.", args: []string{"--help"}, wantErr: flag.ErrHelp, wantStdout: true},
		"Mistake": {reason: "An unknown flag prints usage on stderr.", args: []string{"--nope"}, wantStderr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := New("demo")
			fs.Int("n", 1, "a number")
			var stdout, stderr bytes.Buffer
			err := Parse(fs, tc.args, &stdout, &stderr, "Usage: demo\n")
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("%s\nerror: got %v, want %v", tc.reason, err, tc.wantErr)
			}
			if (err != nil) != (tc.wantStdout || tc.wantStderr) {
				t.Errorf("%s\nerror: got %v", tc.reason, err)
			}
			for _, c := range []struct {
				name string
				buf  *bytes.Buffer
				want bool
			}{{"stdout", &stdout, tc.wantStdout}, {"stderr", &stderr, tc.wantStderr}} {
				got := strings.Contains(c.buf.String(), "Usage: demo\n") && strings.Contains(c.buf.String(), "a number")
				if got != c.want {
					t.Errorf("%s\nusage on %s: got %v, want %v (%q)", tc.reason, c.name, got, c.want, c.buf.String())
				}
			}
		})
	}
}
