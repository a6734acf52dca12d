package reporter

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTokenFileIsReRead checks that a rotated token is used without a
// restart, and that a token file gone missing keeps the last good token.
func TestTokenFileIsReRead(t *testing.T) {
	p := writeFile(t, "token", "first\n")
	tok, err := newFileToken(p)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		reason string
		write  *string
		remove bool
		want   string
	}{
		{reason: "initial token", want: "first"},
		{reason: "rotated token (different size, so the change is seen even within one mtime tick)", write: ptr("second-token"), want: "second-token"},
		{reason: "file removed mid-rotation keeps the last good token", remove: true, want: "second-token"},
	}
	for _, s := range steps {
		if s.write != nil {
			if err := os.WriteFile(p, []byte(*s.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if s.remove {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tok.get()
		if err != nil {
			t.Fatalf("%s: %v", s.reason, err)
		}
		if got != s.want {
			t.Errorf("%s: got %q, want %q", s.reason, got, s.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
