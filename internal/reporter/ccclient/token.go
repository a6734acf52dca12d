package ccclient

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/formspec/formspec-hooks/internal/filereload"
)

// FileToken is the bearer token for Cluster Control, read from a token file
// (filereload's format, exactly one token) under filereload's rules: re-read
// when it changes, nothing kept from it once it is broken, so a revoked
// token is never sent again.
//
// The file may be missing or empty: the Secret behind it is optional, so a
// default install runs without one, and the kubelet fills the mount in when
// the Secret is created later. Until then get reports errNoToken and calls
// go out without Authorization. A file that exists but cannot be read
// (permissions, a directory) is a mistake in the pod spec that will not fix
// itself, and stops the reporter at start.
type FileToken struct {
	tokens *filereload.Tokens
}

// ErrTokenFile is wrapped by New's error when Config.TokenFile exists but
// cannot be read (a directory, a permission problem): a broken pod spec,
// reported at start. A missing or empty file is not an error; calls then
// carry no token.
var ErrTokenFile = errors.New("the Cluster Control token file cannot be read")

// errNoToken is get's answer while the token file is missing or empty.
var errNoToken = errors.New("no bearer token yet")

func NewFileToken(path string, logger *slog.Logger) (*FileToken, error) {
	t := &FileToken{tokens: filereload.NewTokens(path, filereload.Options{Name: "cluster-control-token", Logger: logger})}
	if _, err := t.get(); err != nil && !errors.Is(err, errNoToken) {
		return nil, err
	}
	return t, nil
}

// get returns the current token. The check per request (filereload: an
// inotify look, a stat after a change) is cheap next to the request itself
// and catches Kubernetes' symlink swap of a mounted Secret.
func (t *FileToken) get() (string, error) {
	tok, err := t.tokens.Single()
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, filereload.ErrEmpty):
		return "", fmt.Errorf("%w: %w", errNoToken, err)
	default:
		return "", err
	}
}

// Name identifies the token file in metrics.
func (t *FileToken) Name() string { return t.tokens.Name() }

// Err is nil while the token file is usable: holding one token, or missing
// or empty (the optional Secret is not there yet, and calls go out without
// a token as documented). A file that is there but cannot be read or holds
// more than one token is broken.
func (t *FileToken) Err() error {
	if _, err := t.get(); err != nil && !errors.Is(err, errNoToken) {
		return err
	}
	return nil
}
