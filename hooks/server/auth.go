package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

// TokenFile holds the bearer tokens the hook endpoints accept, read from a
// file with one token per line (blank lines and lines starting with # are
// ignored). Several tokens are accepted at once so that a token can be
// rotated without a window in which Metacontroller is locked out: add the
// new one, switch the caller, remove the old one.
//
// The file is re-read when its modification time, size or identity changes,
// which covers both in-place edits and the symlink swap Kubernetes uses to
// update a mounted Secret.
type TokenFile struct {
	path string

	mu      sync.Mutex
	info    os.FileInfo
	digests [][sha256.Size]byte
}

// NewTokenFile reads the token file once, so that a missing or empty file
// stops the server at start instead of rejecting every request.
func NewTokenFile(path string) (*TokenFile, error) {
	t := &TokenFile{path: path}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Check reports whether token is one of the accepted tokens. It compares
// SHA-256 digests in constant time and looks at every accepted token, so
// neither the time taken nor an early exit tells an attacker how much of a
// guess was right or how long the real tokens are.
func (t *TokenFile) Check(token string) bool {
	// Stat on every call: at Metacontroller's request rates it costs
	// nothing that matters, and a rotated token works on the next request.
	// A failed reload keeps the tokens that were last read successfully: a
	// half-written file must not lock Metacontroller out.
	_ = t.reloadIfChanged()
	t.mu.Lock()
	digests := t.digests
	t.mu.Unlock()

	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range digests {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

func (t *TokenFile) reloadIfChanged() error {
	info, err := os.Stat(t.path)
	if err != nil {
		return fmt.Errorf("cannot stat token file: %w", err)
	}
	t.mu.Lock()
	old := t.info
	t.mu.Unlock()
	if old != nil && os.SameFile(old, info) && old.ModTime().Equal(info.ModTime()) && old.Size() == info.Size() {
		return nil
	}
	return t.reload()
}

func (t *TokenFile) reload() error {
	info, err := os.Stat(t.path)
	if err != nil {
		return fmt.Errorf("cannot stat token file: %w", err)
	}
	raw, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("cannot read token file: %w", err)
	}
	digests := parseTokens(raw)
	if len(digests) == 0 {
		// An empty list would reject everyone; switching auth off is done
		// by dropping the flag, never by emptying the file.
		return errors.New("token file holds no tokens")
	}
	t.mu.Lock()
	t.info, t.digests = info, digests
	t.mu.Unlock()
	return nil
}

func parseTokens(raw []byte) [][sha256.Size]byte {
	var out [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, sha256.Sum256([]byte(line)))
	}
	return out
}

// bearerToken extracts the token from an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireToken rejects requests that do not carry an accepted bearer token.
func requireToken(tokens *TokenFile, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok || !tokens.Check(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="formspec-hooks"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
