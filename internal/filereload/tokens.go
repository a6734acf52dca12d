package filereload

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
)

// ParseTokens reads the one token-file format of this project: one bearer
// token per line; blank lines and lines starting with # are ignored, and
// so is whitespace around a token. Several tokens let a server accept the
// old and the new one during a rotation. A token with whitespace inside is
// refused (it could not travel in an Authorization header), and so is a
// file without any token (ErrEmpty). Errors name line numbers, never
// contents.
func ParseTokens(raw []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsFunc(line, isSpace) {
			return nil, fmt.Errorf("line %d holds whitespace inside a token", n)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot split token file into lines: %w", err)
	}
	if len(out) == 0 {
		return nil, ErrEmpty
	}
	return out, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f' }

// Tokens is a token file (see ParseTokens), reloaded by the package's
// rules: a server checks tokens against it, a client sends its token.
type Tokens struct {
	r *Reloader[tokenSet]
}

type tokenSet struct {
	tokens  []string
	digests [][sha256.Size]byte
}

// NewTokens watches the token file at path. Nothing is read until first
// used; call Err at start to refuse a broken file early.
func NewTokens(path string, opts Options) *Tokens {
	return &Tokens{r: New(opts, func(c [][]byte) (tokenSet, error) {
		toks, err := ParseTokens(c[0])
		if err != nil {
			return tokenSet{}, err
		}
		set := tokenSet{tokens: toks}
		for _, t := range toks {
			set.digests = append(set.digests, sha256.Sum256([]byte(t)))
		}
		return set, nil
	}, path)}
}

// Check reports whether token is one of the file's tokens. A broken file
// accepts none. It compares SHA-256 digests in constant time and looks at
// every accepted token, so neither the time taken nor an early exit tells
// an attacker how much of a guess was right or how long the real tokens
// are.
func (t *Tokens) Check(token string) bool {
	set, err := t.r.Get()
	if err != nil {
		return false
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range set.digests {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// Single returns the file's token for a client to send. A client sends one
// token, so a file with several is refused rather than guessed at.
func (t *Tokens) Single() (string, error) {
	set, err := t.r.Get()
	if err != nil {
		return "", err
	}
	if len(set.tokens) != 1 {
		return "", fmt.Errorf("%s holds %d tokens; a client sends exactly one", t.r.Name(), len(set.tokens))
	}
	return set.tokens[0], nil
}

// Count is how many tokens the file holds now; false while it is broken.
// During a rotation it tells an operator that a replica has read the new
// token beside the old one, without saying anything about either.
func (t *Tokens) Count() (int, bool) {
	set, err := t.r.Get()
	if err != nil {
		return 0, false
	}
	return len(set.tokens), true
}

// Name is the name given in Options.
func (t *Tokens) Name() string { return t.r.Name() }

// Err reports whether the file is broken now.
func (t *Tokens) Err() error { return t.r.Err() }
