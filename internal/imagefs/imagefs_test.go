package imagefs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFiles checks what a program in the image relies on: a CA bundle of
// parseable CA certificates at CABundle, the time zones Go loads, users
// that name nonroot's home as the working directory, a sticky
// world-writable /tmp, and the working directory left to WORKDIR.
func TestFiles(t *testing.T) {
	goroot, err := GOROOT()
	if err != nil {
		t.Skipf("no go command to find the time zones with: %v", err)
	}
	files, err := Files(goroot)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]File{}
	for _, f := range files {
		if _, dup := byPath[f.Path]; dup {
			t.Errorf("%s is listed twice", f.Path)
		}
		byPath[f.Path] = f
		if f.UID != 0 || f.GID != 0 || f.Mode&0o022 != 0 && f.Path != "/tmp" {
			t.Errorf("%s: owner %d:%d, mode %o; want root's, writable by root alone", f.Path, f.UID, f.GID, f.Mode)
		}
	}

	rest := byPath[CABundle].Data
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || !c.IsCA {
			t.Errorf("CA bundle certificate %d: IsCA=%v, %v", n, c != nil && c.IsCA, err)
		}
		n++
	}
	if n < 50 || len(rest) != 0 {
		t.Errorf("the CA bundle has %d certificates and %d trailing bytes; want the public roots, nothing else", n, len(rest))
	}

	zone, ok := byPath[ZoneInfo+"/Europe/Berlin"]
	if !ok {
		t.Fatalf("no %s/Europe/Berlin", ZoneInfo)
	}
	if _, err := time.LoadLocationFromTZData("Europe/Berlin", zone.Data); err != nil {
		t.Errorf("Europe/Berlin does not load: %v", err)
	}

	if diff := cmp.Diff(File{Path: "/tmp", Mode: 0o1777, Dir: true}, byPath["/tmp"]); diff != "" {
		t.Errorf("/tmp: -want, +got:\n%s", diff)
	}
	if _, ok := byPath[WorkingDir]; ok {
		t.Errorf("%s is among the files; WORKDIR must create it, owned by %s", WorkingDir, User)
	}
	if !byPath["/home"].Dir {
		t.Error("/home is missing: WORKDIR would create it owned by the user")
	}
	if want := "nonroot:x:65532:65532:nonroot:" + WorkingDir + ":/sbin/nologin\n"; !strings.Contains(string(byPath["/etc/passwd"].Data), want) {
		t.Errorf("/etc/passwd lacks %q", want)
	}
}

// TestWrite checks that Write gives the modes exactly, whatever the umask.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	err := Write(dir, []File{
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "etc/passwd": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
}
