package filereload

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the user and group unprivileged runs a test as.
const nobody = 65534

// unprivileged reports whether the calling test can go on in this
// process, with file permissions applying to it. As root they do not
// (chmod 000 stops no read), so it runs the same test again in a child
// process as uid and gid 65534 (nobody, without supplementary groups),
// makes the child's result this test's, and returns false.
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	// go test builds the test binary in a directory only root may enter;
	// nobody gets a copy in one it may.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "filereload-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "filereload.test")
	if err := copyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s as uid %d: %v\n%s", t.Name(), nobody, err, out)
		return false
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Errorf("%s as uid %d did not run:\n%s", t.Name(), nobody, out)
		return false
	}
	t.Logf("ran as uid %d:\n%s", nobody, out)
	return false
}

func copyFile(from, to string, mode os.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}
