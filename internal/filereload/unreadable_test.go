package filereload

import (
	"crypto/x509"
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

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// TestUnreadableFileFailsClosed takes read permission away from a file
// that loaded (chmod 000, which changes neither its modification time nor
// its size) and gives it back, for each kind of credentials file. The
// process must be one that file permissions apply to: as root the test
// runs itself again as nobody (see unprivileged).
func TestUnreadableFileFailsClosed(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	tokenFile := filepath.Join(pki.Dir, "tokens")
	write(t, tokenFile, "t0ken\n", 1000)

	// Each case watches one file and says whether what it holds can be
	// used, the way its caller uses it.
	cases := map[string]struct {
		reason string
		file   string
		watch  func(opts Options, clock func() time.Time) (use func() error)
	}{
		"TokenFile": {
			reason: "An unreadable token file refuses the token it held.",
			file:   tokenFile,
			watch: func(opts Options, clock func() time.Time) func() error {
				tok := NewTokens(tokenFile, opts)
				tok.r.now = clock
				return func() error {
					if tok.Check("t0ken") {
						return nil
					}
					if err := tok.Err(); err != nil {
						return err
					}
					return errors.New("token refused, file not broken")
				}
			},
		},
		"TLSKey": {
			reason: "An unreadable key file breaks the serving pair.",
			file:   keyFile,
			watch: func(opts Options, clock func() time.Time) func() error {
				pair := NewKeyPair(certFile, keyFile, opts)
				pair.now = clock
				return pair.Err
			},
		},
		"ClientCA": {
			reason: "An unreadable CA bundle trusts nobody.",
			file:   pki.CAFile,
			watch: func(opts Options, clock func() time.Time) func() error {
				cas := NewCABundle(pki.CAFile, opts)
				cas.now = clock
				return cas.Err
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs testsync.Buffer
			clock := &fakeClock{t: time.Unix(5000, 0)}
			use := tc.watch(Options{Name: "f", Logger: slog.New(slog.NewTextHandler(&logs, nil))}, clock.now)
			if err := use(); err != nil {
				t.Fatalf("at start: %v", err)
			}
			chmod(t, tc.file, 0)
			// The bound the docs state: until the period has passed nothing
			// is read, which is what keeps a check per request cheap.
			if err := use(); err != nil {
				t.Errorf("right after chmod 000, before the period: %v, want the value read before", err)
			}
			clock.advance(DefaultRevalidate)
			for range 3 {
				if diff := cmp.Diff(fs.ErrPermission, use(), cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\none period after chmod 000: -want, +got:\n%s", tc.reason, diff)
				}
			}
			// chmod back is invisible to stat as well: the fix is seen when
			// the period has passed.
			chmod(t, tc.file, 0o600)
			clock.advance(DefaultRevalidate)
			if err := use(); err != nil {
				t.Errorf("one period after chmod 600: %v, want loaded again", err)
			}
			if diff := cmp.Diff([]int{1, 1}, []int{strings.Count(logs.String(), "credentials file broken"), strings.Count(logs.String(), "credentials file loaded again")}); diff != "" {
				t.Errorf("log lines (broken, loaded again): -want, +got:\n%s\nlogs:\n%s", diff, logs.String())
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
