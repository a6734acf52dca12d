// Package kubectl tests the kubectl plugin, cmd/kubectl-formspec, as a
// user runs it: the binary, built here, against a real kube-apiserver
// holding a Workspace in every state (Ready, Idle, Degraded for each
// reason, a denied claim, Terminating), each synced by this repository's
// hooks and given the statuses its controllers would write. The plugin
// talks to the API server through a proxy that records every request and
// answer, so that the tests can show what it asked for, not only what it
// printed. Without the control-plane binaries (FORMSPEC_K8S_BIN) the tests
// skip and say so.
package kubectl

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestPlugin runs every plugin test against one control plane and one
// world of objects: building them takes seconds, each command a fraction
// of one. The diff tests change the world, so they run last.
func TestPlugin(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	crds, err := filepath.Glob(filepath.Join(controlplane.RepoRoot(t), "deploy", "crds", "formspec.dev_*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	if err := c.InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install deploy/crds: %v", err)
	}
	w := &world{t: t, c: c}
	w.build()
	p := &plugin{bin: buildPlugin(t), proxy: startProxy(t, cp), cacheDir: t.TempDir()}

	t.Run("TraceStates", func(t *testing.T) { testTraceStates(t, p) })
	t.Run("TraceTree", func(t *testing.T) { testTraceTree(t, p) })
	t.Run("TraceOutputs", func(t *testing.T) { testTraceOutputs(t, p) })
	t.Run("TraceNames", func(t *testing.T) { testTraceNames(t, p) })
	t.Run("TraceViewer", func(t *testing.T) { testTraceViewer(t, p) })
	t.Run("KubectlRunsPlugin", func(t *testing.T) { testKubectlRunsPlugin(t, p) })
	t.Run("DiffUnchanged", func(t *testing.T) { testDiffUnchanged(t, p) })
	t.Run("DiffFlags", func(t *testing.T) { testDiffFlags(t, p) })
	t.Run("DiffChanges", func(t *testing.T) { testDiffChanges(t, p, w) })
	t.Run("DiffCredentialsFrom010", func(t *testing.T) { testDiffCredentialsFrom010(t, p, w) })
	t.Run("DiffErrors", func(t *testing.T) { testDiffErrors(t, p) })
	t.Run("TakeoverPrepare", func(t *testing.T) { testTakeoverPrepare(t, p, w) })
	// Last, over everything the others printed and asked for.
	t.Run("NoSecretData", func(t *testing.T) { testNoSecretData(t, p, w) })
}

// buildPlugin builds cmd/kubectl-formspec under its own name, as a user
// installs it.
func buildPlugin(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build cmd/kubectl-formspec with")
	}
	dir := t.TempDir()
	cmd := exec.Command(goBin, "build", "-o", dir, "./cmd/kubectl-formspec")
	cmd.Dir = controlplane.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-formspec: %v\n%s", err, out)
	}
	return filepath.Join(dir, "kubectl-formspec")
}

// plugin runs the plugin binary against the proxy and keeps everything it
// printed.
type plugin struct {
	bin      string
	proxy    *proxy
	cacheDir string

	mu      sync.Mutex
	printed []string
}

// result is one run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the plugin with args after the connection flags kubectl would
// pass through: the proxy's kubeconfig and a discovery cache of the
// test's own.
func (p *plugin) run(t testing.TB, args ...string) result {
	t.Helper()
	return p.runCommand(t, p.bin, args...)
}

func (p *plugin) runCommand(t testing.TB, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.proxy.kubeconfig, "HOME="+p.cacheDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	p.mu.Lock()
	p.printed = append(p.printed, stdout.String(), stderr.String())
	p.mu.Unlock()
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// proxy stands between the plugin and the API server, authenticating for
// it and recording every request with its answer.
type proxy struct {
	kubeconfig string

	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path, accept string
	body                 []byte
}

// startProxy serves a reverse proxy to the control plane over TLS, with a
// CA of its own and a kubeconfig that trusts it. It asks the API server
// for uncompressed answers so that it can record them.
func startProxy(t *testing.T, cp *controlplane.ControlPlane) *proxy {
	t.Helper()
	target, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CACert)
	p := &proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+cp.Token)
			r.Out.Header.Del("Accept-Encoding")
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			req := resp.Request
			p.mu.Lock()
			p.requests = append(p.requests, recorded{method: req.Method, path: req.URL.Path, accept: req.Header.Get("Accept"), body: body})
			p.mu.Unlock()
			return nil
		},
	}
	ca, err := controlplane.NewCA("kubectl-test-proxy")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("127.0.0.1", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rp)
	// A plugin that exits with connections still opening resets them;
	// that is no failure of anything under test.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	caFile := filepath.Join(t.TempDir(), "proxy-ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    token: replaced-by-the-proxy
contexts:
- name: test
  context:
    cluster: test
    user: user
current-context: test
`, srv.URL, caFile)
	if err := os.WriteFile(p.kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordedRequests returns what the plugin asked for so far.
func (p *proxy) recordedRequests() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recorded(nil), p.requests...)
}
