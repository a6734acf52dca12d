package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// nobody is the user and group the server runs as in
// TestServeBinaryDistrustsUnreadableFiles when the test runs as root.
const nobody = 65534

// TestServeBinaryDistrustsUnreadableFiles runs `serve` with TLS and a
// token file as a user that file permissions apply to (nobody, when the
// test runs as root: root reads a file whatever its mode), takes read
// permission away from the token file or the TLS key (chmod 000, which
// stat does not see as a change) and gives it back: the server stops
// trusting the file within one re-validation period, refusing the old
// token or every handshake and failing /readyz, logs it once without
// quoting the file, and trusts the file again once it can read it.
func TestServeBinaryDistrustsUnreadableFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building and starting the server binary")
	}
	built := unprivilegedCopy(t, filepath.Join(buildBinaries(t), "formspec-hooks"))
	cases := map[string]struct {
		reason    string
		file      string // in the server's directory
		wantReady string
		wantHook  string
	}{
		"TokenFile": {reason: "An unreadable token file refuses the token it held.", file: "tokens",
			wantReady: "503 credentials file auth-tokens is broken", wantHook: "401 Unauthorized"},
		"TLSKey": {reason: "An unreadable key fails every handshake.", file: "tls.key",
			wantReady: "503 credentials file tls-serving-pair is broken", wantHook: "no answer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Each case waits out re-validation periods; side by side they
			// take as long as one.
			t.Parallel()
			srv := startUnprivileged(t, built)
			testsync.WaitWithin(t, 60*time.Second, "the server to be ready", func() bool { return srv.ready() == "200 ok" })
			if diff := cmp.Diff("200 OK", srv.hook()); diff != "" {
				t.Fatalf("hook request with the token at start: -want, +got:\n%s", diff)
			}

			// The bound the docs state is one re-validation period; the
			// slack covers a busy machine, not a second period.
			bound := filereload.DefaultRevalidate + 10*time.Second
			file := filepath.Join(srv.dir, tc.file)
			if err := os.Chmod(file, 0); err != nil {
				t.Fatal(err)
			}
			testsync.WaitWithin(t, bound, fmt.Sprintf("/readyz to say %q after chmod 000 %s", tc.wantReady, tc.file), func() bool {
				return srv.ready() == tc.wantReady
			})
			if diff := cmp.Diff(tc.wantHook, srv.hook()); diff != "" {
				t.Errorf("%s\nhook request with the old token: -want, +got:\n%s", tc.reason, diff)
			}
			// chmod back is invisible to stat too.
			if err := os.Chmod(file, 0o644); err != nil {
				t.Fatal(err)
			}
			testsync.WaitWithin(t, bound, "the server to be ready after chmod 644 "+tc.file, func() bool {
				return srv.ready() == "200 ok"
			})
			if diff := cmp.Diff("200 OK", srv.hook()); diff != "" {
				t.Errorf("%s\nhook request once the file is readable again: -want, +got:\n%s", tc.reason, diff)
			}

			// The log reaches the test through a pipe, maybe after the
			// answers that followed it.
			want := []string{"credentials file broken, refusing to use it", "credentials file loaded again"}
			testsync.WaitFor(t, fmt.Sprintf("the log to say %q about the file, once each", want), func() bool {
				return cmp.Equal(want, srv.fileLogs())
			})
			if strings.Contains(srv.logs.String(), "t0ken") || strings.Contains(srv.logs.String(), "PRIVATE KEY") {
				t.Errorf("the log quotes a credentials file")
			}
		})
	}
}

// unprivilegedServer is a formspec-hooks serve process started by
// startUnprivileged.
type unprivilegedServer struct {
	dir             string // holds the binary, tokens, tls.crt and tls.key
	listen, metrics string
	hooks           *http.Client
	logs            *testsync.Buffer
	body            []byte
}

// startUnprivileged starts a copy of the built binary with TLS and a token
// file ("t0ken"), all in a directory of its own, as nobody if the test
// runs as root.
// unprivilegedCopy copies the binary at built into a directory that the
// unprivileged user may enter (buildBinaries' directory is root's alone),
// once, before the cases run side by side: a binary written while another
// case forks would be held open for writing by that child, and exec would
// fail with "text file busy".
func unprivilegedCopy(t *testing.T, built string) string {
	t.Helper()
	dir := unprivilegedDir(t)
	bin, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(built))
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// unprivilegedDir makes a temporary directory the unprivileged user may
// enter and read, removed when t ends.
func unprivilegedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "formspec-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startUnprivileged(t *testing.T, bin string) *unprivilegedServer {
	t.Helper()
	// The server's files: in a directory it may enter, readable by it.
	dir := unprivilegedDir(t)
	certPEM, keyPEM, pool := servingPair(t)
	files := map[string]struct {
		content []byte
		mode    os.FileMode
	}{
		"tokens": {[]byte("t0ken\n"), 0o644}, "tls.crt": {certPEM, 0o644}, "tls.key": {keyPEM, 0o644},
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(dir, name), f.content, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	body, err := os.ReadFile("../../fixtures/nodes/sync/ready-node/request.json")
	if err != nil {
		t.Fatal(err)
	}

	ports := freePorts(t, 2)
	s := &unprivilegedServer{dir: dir, listen: ports[0], metrics: ports[1], logs: &testsync.Buffer{}, body: body}
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"serve"}, runFlags(t, s.listen, s.metrics)...)
	args = append(args, "--log-format", "json", "--auth-token-file", filepath.Join(dir, "tokens"),
		"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-key-file", filepath.Join(dir, "tls.key"))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	}
	cmd.Stderr = s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("\nUid:\t%d\t%[1]d\t%[1]d\t%[1]d\n", nobody); !strings.Contains(string(status), want) {
			t.Fatalf("the server does not run as uid %d:\n%s", nobody, status)
		}
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})

	s.hooks = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		// A handshake per request, so that each sees the key file as it
		// is then.
		DisableKeepAlives: true,
	}}
	return s
}

// hook posts a node sync with the token and returns the status, or "no
// answer".
func (s *unprivilegedServer) hook() string {
	req, err := http.NewRequest(http.MethodPost, "https://"+s.listen+"/v1/nodes/sync", bytes.NewReader(s.body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := s.hooks.Do(req)
	if err != nil {
		return "no answer"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Status
}

// ready returns /readyz's code and body.
func (s *unprivilegedServer) ready() string {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + s.metrics + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// fileLogs returns the messages of the complete log lines that name a
// file.
func (s *unprivilegedServer) fileLogs() []string {
	var out []string
	for line := range strings.Lines(s.logs.String()) {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		var l struct{ Msg, File string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			out = append(out, fmt.Sprintf("%q is not JSON: %v", line, err))
			continue
		}
		if l.File != "" {
			out = append(out, l.Msg)
		}
	}
	return out
}
