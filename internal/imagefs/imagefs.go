// Package imagefs is the project image's filesystem besides its two
// binaries: the users, a CA bundle, the time zones, /tmp and the parents of
// the working directory. The Dockerfile's build stage writes it with
// ./internal/imagefs/rootfs and copies it onto an empty image; `make release`
// puts the same files into the released image without a container build
// (test/node's image builder), so both ways give the same files from the
// same sources:
//
//   - the CA bundle is the Mozilla NSS root store as Go publishes it in the
//     module golang.org/x/crypto/x509roots/fallback, pinned by go.mod and
//     go.sum: the same bytes on every machine, unlike a build machine's
//     /etc/ssl, which carries whatever local CAs that machine was given;
//   - the time zones are the Go toolchain's own copy of the IANA database
//     ($GOROOT/lib/time/zoneinfo.zip), which every Go installation has and
//     whose version the release's provenance records with the Go version.
package imagefs

import (
	"archive/zip"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The paths and the user the image's configuration names.
const (
	// CABundle is where SSL_CERT_FILE points: the path Debian and
	// distroless use, which Go's crypto/x509 also reads by default.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// ZoneInfo is where Go and libc look for time zones.
	ZoneInfo = "/usr/share/zoneinfo"
	// WorkingDir is the image's working directory, nonroot's home. It is
	// not among Files: the Dockerfile's WORKDIR, after USER, creates it
	// owned by that user (mode 0755), and test/node's builder does the
	// same.
	WorkingDir = "/home/nonroot"
	// User is the user the image runs as, uid:gid (distroless' nonroot).
	User = "65532:65532"
)

// File is one regular file or directory (Dir) of the image, owned by UID
// and GID.
type File struct {
	Path     string
	Mode     int64
	Data     []byte
	Dir      bool
	UID, GID int
}

// passwd and group name root, nobody and nonroot, as distroless does: a
// program that looks its user up (os/user) finds one, and nonroot's home
// is the working directory.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:" + WorkingDir + ":/sbin/nologin\n"
	group  = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// Files returns the image's files, all owned by root, sorted by path, with
// the time zones of the Go installation at goroot.
func Files(goroot string) ([]File, error) {
	ca, err := CABundlePEM()
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: CABundle, Mode: 0o644, Data: ca},
		// World-writable with the sticky bit, as on any Linux system.
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: path.Dir(WorkingDir), Mode: 0o755, Dir: true},
	}
	zones, err := zoneFiles(filepath.Join(goroot, "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return nil, err
	}
	files = append(files, zones...)
	return withParents(files), nil
}

// CABundlePEM is the fallback module's roots as one PEM file, in the
// module's order. A root the module trusts only with a constraint (a
// distrust-after date, for a CA being phased out) is left out: a PEM
// bundle cannot carry the constraint, and trusting the root without it
// would accept what its own store no longer does.
func CABundlePEM() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("the fallback bundle has no unconstrained roots")
	}
	return buf.Bytes(), nil
}

// zoneFiles unpacks Go's zoneinfo.zip under ZoneInfo.
func zoneFiles(zipPath string) ([]File, error) {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, fmt.Errorf("cannot read the Go installation's time zones: %w", err)
	}
	defer func() { _ = zr.Close() }()
	var out []File
	for _, f := range zr.File {
		name := path.Clean(f.Name)
		if strings.HasPrefix(name, "..") || path.IsAbs(name) {
			return nil, fmt.Errorf("%s: %q leaves the archive", zipPath, f.Name)
		}
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", zipPath, f.Name, err)
		}
		out = append(out, File{Path: path.Join(ZoneInfo, name), Mode: 0o644, Data: data})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no time zones", zipPath)
	}
	return out, nil
}

// withParents adds every missing parent directory (root's, 0755) and
// sorts by path, so that a tar of the files lists parents first.
func withParents(files []File) []File {
	have := map[string]bool{}
	for _, f := range files {
		have[f.Path] = true
	}
	for _, f := range slices.Clone(files) {
		for dir := path.Dir(f.Path); dir != "/" && !have[dir]; dir = path.Dir(dir) {
			have[dir] = true
			files = append(files, File{Path: dir, Mode: 0o755, Dir: true})
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// GOROOT is the root of the Go installation the go command on the PATH
// uses: the one whose time zones a build takes.
func GOROOT() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Write writes files under dir, with their modes exactly (whatever the
// umask) and, when it runs as root, their owners.
func Write(dir string, files []File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		mode := os.FileMode(f.Mode & 0o777)
		if f.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if f.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, f.Data, mode); err != nil {
				return err
			}
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, f.UID, f.GID); err != nil {
				return err
			}
		}
	}
	return nil
}
