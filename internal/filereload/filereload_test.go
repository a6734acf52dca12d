package filereload

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func write(t *testing.T, path, content string, mtime int64) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// An explicit mtime makes a change visible on file systems with coarse
	// timestamps, and lets a test keep one on purpose.
	if err := os.Chtimes(path, time.Unix(mtime, 0), time.Unix(mtime, 0)); err != nil {
		t.Fatal(err)
	}
}

// upper is a toy parser: the file's content in capitals; "bad" does not
// parse.
func upper(c [][]byte) (string, error) {
	if string(c[0]) == "bad" {
		return "", errors.New("does not parse")
	}
	return strings.ToUpper(string(c[0])), nil
}

// fakeClock is a Reloader's clock that moves only when a test says so.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestReloaderRules walks one file through the changes a mounted Secret
// goes through and checks the "changed", "re-validated" and "broken"
// rules.
func TestReloaderRules(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	var logs bytes.Buffer
	r := New(Options{Name: "toy", Logger: slog.New(slog.NewTextHandler(&logs, nil))}, upper, path)
	clock := &fakeClock{t: time.Unix(5000, 0)}
	r.now = clock.now

	type got struct {
		Value  string
		Broken bool
	}
	steps := []struct {
		reason string
		change func()
		// advance moves the clock after the change.
		advance time.Duration
		want    got
	}{
		{reason: "A missing file is broken.", change: func() {}, want: got{Broken: true}},
		{reason: "The file appears.", change: func() { write(t, path, "a", 1000) }, want: got{Value: "A"}},
		{reason: "Same stat, different content: not seen as changed (the rule is stat-based).", change: func() { write(t, path, "b", 1000) }, want: got{Value: "A"}},
		{reason: "Nor just before the re-validation period has passed: Get does not read the file every time.", change: func() {}, advance: DefaultRevalidate - time.Nanosecond, want: got{Value: "A"}},
		{reason: "Once the period has passed, the file is read again although stat shows no change.", change: func() {}, advance: time.Nanosecond, want: got{Value: "B"}},
		{reason: "The period starts again with that read.", change: func() { write(t, path, "z", 1000) }, advance: DefaultRevalidate - time.Nanosecond, want: got{Value: "B"}},
		{reason: "A new modification time is a change.", change: func() { write(t, path, "c", 1001) }, want: got{Value: "C"}},
		{reason: "A new size alone is a change.", change: func() { write(t, path, "cc", 1001) }, want: got{Value: "CC"}},
		{reason: "Content that does not parse is broken; the old value is not kept.", change: func() { write(t, path, "bad", 1002) }, want: got{Broken: true}},
		{reason: "A fixed file loads again.", change: func() { write(t, path, "d", 1003) }, want: got{Value: "D"}},
		{reason: "A symlink swap to another file (how the kubelet updates a Secret) is a change, even with the same time and size.", change: func() {
			other := filepath.Join(dir, "other")
			write(t, other, "e", 1003)
			link := filepath.Join(dir, "link")
			if err := os.Symlink(other, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(link, path); err != nil {
				t.Fatal(err)
			}
		}, want: got{Value: "E"}},
		{reason: "A deleted file is broken.", change: func() { _ = os.Remove(path) }, want: got{Broken: true}},
		{reason: "A path that cannot be read (a directory) is broken.", change: func() { _ = os.Mkdir(path, 0o700) }, want: got{Broken: true}},
	}
	for i, s := range steps {
		s.change()
		clock.advance(s.advance)
		v, err := r.Get()
		if diff := cmp.Diff(s.want, got{Value: v, Broken: err != nil}); diff != "" {
			t.Errorf("step %d: %s\n-want, +got:\n%s", i, s.reason, diff)
		}
	}
	// The first outcome is the caller's to report; after that, each change
	// between working and broken is logged once, however often Get runs.
	for range 3 {
		_, _ = r.Get()
	}
	if diff := cmp.Diff([]int{2, 2}, []int{strings.Count(logs.String(), "credentials file broken"), strings.Count(logs.String(), "credentials file loaded again")}); diff != "" {
		t.Errorf("log lines (broken, loaded again): -want, +got:\n%s\nlogs:\n%s", diff, logs.String())
	}
}

func TestReloaderRevalidateOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	write(t, path, "a", 1000)
	cases := map[string]struct {
		reason  string
		period  time.Duration
		advance time.Duration
		want    string
	}{
		"DefaultKeeps":   {reason: "Unset, the period is DefaultRevalidate.", advance: DefaultRevalidate - time.Nanosecond, want: "A"},
		"DefaultRereads": {reason: "Unset, the period is DefaultRevalidate.", advance: DefaultRevalidate, want: "B"},
		"NegativeIsDefault": {reason: "A negative period would mean reading on every Get; it takes the default.",
			period: -time.Second, advance: DefaultRevalidate - time.Nanosecond, want: "A"},
		"ShortKeeps":   {reason: "A period of its own is kept.", period: time.Second, advance: time.Second - time.Nanosecond, want: "A"},
		"ShortRereads": {reason: "A period of its own is kept.", period: time.Second, advance: time.Second, want: "B"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			write(t, path, "a", 1000)
			r := New(Options{Name: "toy", Revalidate: tc.period}, upper, path)
			clock := &fakeClock{t: time.Unix(5000, 0)}
			r.now = clock.now
			if _, err := r.Get(); err != nil {
				t.Fatal(err)
			}
			write(t, path, "b", 1000)
			clock.advance(tc.advance)
			got, err := r.Get()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nvalue after %v: -want, +got:\n%s", tc.reason, tc.advance, diff)
			}
		})
	}
}

func TestReloaderErrorsKeepContentsOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write(t, path, "s3cret-token with-space\n", 1000)
	err := NewTokens(path, Options{Name: "auth-tokens"}).Err()
	if err == nil {
		t.Fatal("a token with whitespace inside was accepted")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error quotes the file: %v", err)
	}
}

func TestParseTokens(t *testing.T) {
	cases := map[string]struct {
		reason  string
		raw     string
		want    []string
		wantErr error
	}{
		"One":          {reason: "One token per line.", raw: "t0ken\n", want: []string{"t0ken"}},
		"NoNewline":    {reason: "The last line needs no newline (kubectl create secret --from-literal writes none).", raw: "t0ken", want: []string{"t0ken"}},
		"Several":      {reason: "Several tokens for a rotation; comments, blank lines and surrounding space ignored.", raw: "# old\nt-old\n\n  t-new \r\n", want: []string{"t-old", "t-new"}},
		"Empty":        {reason: "No token at all is ErrEmpty.", raw: "", wantErr: ErrEmpty},
		"OnlyComments": {reason: "Comments are not tokens.", raw: "# nothing\n\n", wantErr: ErrEmpty},
		"InnerSpace":   {reason: "A token cannot carry whitespace in a header.", raw: "a b\n", wantErr: cmpopts.AnyError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTokens([]byte(tc.raw))
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ntokens: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		reason     string
		content    *string
		check      map[string]bool
		single     string
		singleErr  error
		count      int
		wantBroken error
	}{
		"Missing": {
			reason: "A missing file accepts nothing and has no token to send.",
			check:  map[string]bool{"": false, "a": false}, singleErr: fs.ErrNotExist, wantBroken: fs.ErrNotExist,
		},
		"Empty": {
			reason:  "An empty file accepts nothing; a client can tell it from a broken one.",
			content: ptr(""), check: map[string]bool{"": false}, singleErr: ErrEmpty, wantBroken: ErrEmpty,
		},
		"One": {
			reason:  "One token is accepted and sent.",
			content: ptr("a\n"), check: map[string]bool{"a": true, "b": false, "": false, "a ": false}, single: "a", count: 1,
		},
		"Two": {
			reason:  "A server accepts either; a client refuses to guess which to send.",
			content: ptr("a\nb\n"), check: map[string]bool{"a": true, "b": true, "ab": false}, singleErr: cmpopts.AnyError, count: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if tc.content != nil {
				write(t, path, *tc.content, 1000)
			}
			tok := NewTokens(path, Options{Name: "t"})
			got := map[string]bool{}
			for k := range tc.check {
				got[k] = tok.Check(k)
			}
			if diff := cmp.Diff(tc.check, got); diff != "" {
				t.Errorf("%s\nCheck: -want, +got:\n%s", tc.reason, diff)
			}
			single, err := tok.Single()
			if diff := cmp.Diff(tc.singleErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nSingle error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.single, single); diff != "" {
				t.Errorf("%s\nSingle: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantBroken, tok.Err(), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nErr: -want, +got:\n%s", tc.reason, diff)
			}
			// A broken file counts nothing, and says so apart from a count.
			count, ok := tok.Count()
			if diff := cmp.Diff([2]any{tc.count, tc.wantBroken == nil}, [2]any{count, ok}); diff != "" {
				t.Errorf("%s\nCount: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
