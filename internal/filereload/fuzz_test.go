package filereload

import (
	"bufio"
	"errors"
	"regexp"
	"strings"
	"testing"
)

var lineError = regexp.MustCompile(`^line [0-9]+ holds whitespace inside a token$`)

// FuzzParseTokens checks what every accepted token file gives, whatever its
// bytes: tokens without whitespace or comment markers, never an empty list
// without an error, and errors that never quote the file.
func FuzzParseTokens(f *testing.F) {
	for _, seed := range []string{"", "t0ken", "# c\na\n\n b \r\n", "a b", "\x00\n#", strings.Repeat("x", 70000)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		toks, err := ParseTokens(raw)
		if err != nil {
			if len(toks) != 0 {
				t.Fatalf("tokens %q beside error %v", toks, err)
			}
			if !errors.Is(err, ErrEmpty) && !errors.Is(err, bufio.ErrTooLong) && !lineError.MatchString(err.Error()) {
				t.Fatalf("error %q is none of the known ones, which never quote the file", err)
			}
			return
		}
		if len(toks) == 0 {
			t.Fatal("no tokens and no error")
		}
		for _, tok := range toks {
			if tok == "" || strings.HasPrefix(tok, "#") || strings.ContainsAny(tok, " \t\r\n\v\f") {
				t.Fatalf("accepted token %q", tok)
			}
		}
	})
}
