// Package controlplane runs a real Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager) for tests, on 127.0.0.1 only,
// and talks to it with a small JSON client.
//
// The binaries are not downloaded: test/k8s-binaries.sh builds them from the
// pinned test/tools module into a directory that tests find through the
// FORMSPEC_K8S_BIN environment variable (make test sets it). When the
// variable is unset or a binary is missing, Start skips the test and says how
// to build them.
//
// Each Start gets its own etcd data directory, random free ports, a
// self-generated CA and serving certificate, a static admin token and a
// service-account signing key, and everything is stopped (process groups
// killed) and removed when the test ends.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvBinDir names the environment variable holding the directory with the
// etcd, kube-apiserver and kube-controller-manager binaries.
const EnvBinDir = "FORMSPEC_K8S_BIN"

// startTimeout bounds how long the control plane may take to become ready.
// It is a guard against a hung process, not a performance assertion: a cold
// start on a loaded two-core machine takes well under a minute.
const startTimeout = 3 * time.Minute

// stopGrace is how long a process gets to exit after SIGTERM before its
// process group is killed.
const stopGrace = 10 * time.Second

// DefaultControllers are the kube-controller-manager controllers Start runs:
// garbage collection (ownerReferences, the basis of Metacontroller's child
// cleanup), namespace deletion, and the service-account machinery that
// makes a namespace usable by pods and by Metacontroller's RBAC.
//
// The deployment, replicaset and horizontal-pod-autoscaler controllers are
// deliberately absent: there is no kubelet to run pods, so a test plays
// those controllers itself, writing a Deployment's status and replica
// count when it wants to, and nothing overwrites them.
var DefaultControllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"clusterrole-aggregation-controller",
}

// ControlPlane is a running etcd, kube-apiserver and (unless disabled)
// kube-controller-manager.
type ControlPlane struct {
	// URL is the API server's base URL, https://127.0.0.1:<port>.
	URL string
	// Token is a bearer token of a user in system:masters.
	Token string
	// CACert is the PEM CA certificate that signed the API server's
	// serving certificate.
	CACert []byte
	// Kubeconfig is the path of a kubeconfig for the admin user.
	Kubeconfig string
	// Dir is the temporary directory holding data, certificates and logs.
	Dir string

	client *Client
	// apiserver is the running kube-apiserver, which RestartAPIServer
	// restarts.
	apiserver *Process
	// etcd is the running etcd.
	etcd *Process
}

// EtcdPid is the process id of the control plane's etcd, for tests that
// measure what it spends.
func (cp *ControlPlane) EtcdPid() int { return cp.etcd.Pid() }

// Client returns a client authenticated as the admin user.
func (cp *ControlPlane) Client() *Client { return cp.client }

type config struct {
	controllerManager bool
	controllers       []string
	apiServerFlags    []string
}

// Option configures Start.
type Option func(*config)

// WithoutControllerManager starts only etcd and kube-apiserver, for tests
// that need admission and storage but no controllers; it starts faster.
func WithoutControllerManager() Option {
	return func(c *config) { c.controllerManager = false }
}

// WithControllers replaces DefaultControllers.
func WithControllers(names ...string) Option {
	return func(c *config) { c.controllers = names }
}

// WithAPIServerFlags appends flags to kube-apiserver's command line, after
// Start's own: a single-valued flag given again overrides Start's value.
func WithAPIServerFlags(flags ...string) Option {
	return func(c *config) { c.apiServerFlags = append(c.apiServerFlags, flags...) }
}

// BinDir returns the directory named by FORMSPEC_K8S_BIN when it holds all
// three binaries, or an error saying how to build them.
func BinDir() (string, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: build the control-plane binaries with 'make k8s-binaries' (or test/k8s-binaries.sh) and set %s to their directory, or run 'make test'", EnvBinDir, EnvBinDir)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s=%s has no %s: build the control-plane binaries with 'make k8s-binaries' (or test/k8s-binaries.sh)", EnvBinDir, dir, name)
		}
	}
	return dir, nil
}

// Start runs a control plane for the duration of the test, skipping the test
// when the binaries are not available. It fails the test if the control
// plane does not become ready; on failure the tail of each process's log is
// written to the test log.
func Start(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Skip(err.Error())
	}
	cfg := config{controllerManager: true, controllers: DefaultControllers}
	for _, o := range opts {
		o(&cfg)
	}

	dir, err := os.MkdirTemp("", "formspec-controlplane-")
	if err != nil {
		t.Fatalf("cannot create control plane directory: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("control plane files kept in %s", dir)
		}
	})
	cp := &ControlPlane{Dir: dir, Token: randomHex(t, 16)}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	pki, err := writePKI(dir)
	if err != nil {
		t.Fatalf("cannot write certificates: %v", err)
	}
	cp.CACert = pki.caCert

	ports := FreePorts(t, 3)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	etcd := startProcess(t, dir, filepath.Join(bin, "etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Test data need not survive a crash; fsync dominates etcd's
		// latency on small disks.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	cp.etcd = etcd
	if err := waitFor(ctx, etcd, func() bool { return etcdHealthy(etcdURL) }); err != nil {
		t.Fatalf("etcd did not become healthy: %v", err)
	}

	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.Token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatalf("cannot write token file: %v", err)
	}
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saKey,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// The lease reconciler would try to publish 127.0.0.1 as the
		// kubernetes Service's endpoint, which validation rejects.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	apiserver := startProcess(t, dir, filepath.Join(bin, "kube-apiserver"), append(apiArgs, cfg.apiServerFlags...)...)
	cp.apiserver = apiserver
	cp.client, err = NewClient(cp.URL, cp.Token, cp.CACert)
	if err != nil {
		t.Fatalf("cannot create client: %v", err)
	}
	if err := waitFor(ctx, apiserver, func() bool {
		_, err := cp.client.Do(http.MethodGet, "/readyz", nil)
		return err == nil
	}); err != nil {
		t.Fatalf("kube-apiserver did not become ready: %v", err)
	}

	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, cp.URL, cp.Token, pki.caCert); err != nil {
		t.Fatalf("cannot write kubeconfig: %v", err)
	}
	if !cfg.controllerManager {
		t.Logf("control plane (etcd, kube-apiserver) ready at %s in %v", cp.URL, time.Since(started).Round(100*time.Millisecond))
		return cp
	}
	kcm := startProcess(t, dir, filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+cp.Kubeconfig,
		"--controllers="+strings.Join(cfg.controllers, ","),
		"--leader-elect=false",
		// No HTTPS listener: nothing scrapes it, and readiness is judged
		// from the API (below) instead.
		"--secure-port=0",
		"--service-account-private-key-file="+pki.saKey,
		"--root-ca-file="+pki.caFile,
		"--use-service-account-credentials=false",
	)
	if contains(cfg.controllers, "serviceaccount-controller") {
		// The serviceaccount controller creating the default namespace's
		// ServiceAccount shows the controller manager is up and syncing.
		if err := waitFor(ctx, kcm, func() bool {
			_, err := cp.client.Do(http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil)
			return err == nil
		}); err != nil {
			t.Fatalf("kube-controller-manager did not start: %v", err)
		}
	}
	t.Logf("control plane (etcd, kube-apiserver, kube-controller-manager) ready at %s in %v", cp.URL, time.Since(started).Round(100*time.Millisecond))
	return cp
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("cannot read random bytes: %v", err)
	}
	return hex.EncodeToString(b)
}

// FreePorts returns n distinct ports that were free on every interface a
// moment ago. They are drawn at random from below the kernel's ephemeral
// range (ephemeralLow), not asked of the kernel with port 0: the kernel
// hands out ports from that range as the source port of every outgoing
// connection too, so on a busy machine a client connection could take one
// between this call and its use (seen: the KEDA interceptor, which listens
// on every interface, failing with "address already in use" during make
// test). Another test drawing the same port at the same moment still
// could; that shows up as a start failure.
func FreePorts(t testing.TB, n int) []int {
	const lowest = 10000
	high := ephemeralLow()
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("cannot find %d free ports between %d and %d", n, lowest, high)
		}
		port := lowest + mrand.IntN(high-lowest)
		// Held open until all are found, so that the ports are distinct.
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports
}

// ephemeralLow is the lowest port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), or 32768, Linux's default, where it
// cannot be read or leaves too little room below it.
func ephemeralLow() int {
	const linuxDefault = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low < 20000 {
		return linuxDefault
	}
	return low
}

func etcdHealthy(url string) bool {
	resp, err := http.Get(url + "/health")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode == http.StatusOK
}

// Process is a started binary whose exit is observed in the background.
type Process struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// ProcessConfig says where StartProcess runs a binary and how much of its
// log a failed test shows.
type ProcessConfig struct {
	// Dir is the working directory, which also holds the log,
	// <Dir>/<binary name>.log.
	Dir string
	// LogLines is how many of the log's last lines are written to the test
	// log when the test fails (default 40).
	LogLines int
	// Env holds KEY=value pairs added to the test's environment.
	Env []string
}

// StartProcess runs bin with the same hygiene as the control plane's own
// processes: its own process group, killed by the kernel if the test binary
// dies, stopped (SIGTERM, then SIGKILL after a grace period) when the test
// ends, and its log's tail shown when the test fails. Tests use it for the
// other binaries they run beside the control plane.
func StartProcess(t testing.TB, cfg ProcessConfig, bin string, args ...string) *Process {
	t.Helper()
	if cfg.LogLines <= 0 {
		cfg.LogLines = 40
	}
	return startProcessEnv(t, cfg.Dir, cfg.LogLines, cfg.Env, bin, args...)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Pid is the process's ID, for reading its usage from /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's stdout and stderr.
func (p *Process) LogPath() string { return p.log }

// WaitReady polls ready every 100ms until it is true, and fails with the
// log's tail when the process exits first or ctx ends.
func (p *Process) WaitReady(ctx context.Context, ready func() bool) error {
	return waitFor(ctx, p, ready)
}

// Stop terminates the process group and waits for the process to exit.
// It is safe to call more than once; the cleanup StartProcess registers
// calls it too.
func (p *Process) Stop() { p.stop() }

// startProcess runs bin in its own process group, logging to
// <dir>/<name>.log, and registers a cleanup that terminates the group.
func startProcess(t testing.TB, dir, bin string, args ...string) *Process {
	t.Helper()
	return startProcessEnv(t, dir, 40, nil, bin, args...)
}

func startProcessEnv(t testing.TB, dir string, logLines int, env []string, bin string, args ...string) *Process {
	t.Helper()
	name := filepath.Base(bin)
	p := &Process{name: name, log: filepath.Join(dir, name+".log")}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := p.start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (last %d lines of %s):\n%s", name, logLines, p.log, tail(p.log, logLines))
		}
	})
	return p
}

// start runs cmd as the process, in its own process group, logging to
// p.log (appending to what an earlier run of it wrote).
func (p *Process) start(cmd *exec.Cmd) error {
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create %s log: %w", p.name, err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("cannot start %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.err = cmd, make(chan struct{}), nil
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return nil
}

// restart stops the process and runs it again with the same command line,
// environment and log; the cleanup that stops it stays as it was.
func (p *Process) restart() error {
	p.stop()
	cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	cmd.Dir, cmd.Env = p.cmd.Dir, p.cmd.Env
	return p.start(cmd)
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace,
// and waits for the process to be reaped.
func (p *Process) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
	}
	// Anything the process started in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitFor polls ready until it is true, the process exits or ctx ends.
func waitFor(ctx context.Context, p *Process, ready func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %v (log: %s)\n%s", p.name, p.err, p.log, tail(p.log, 40))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (log: %s)\n%s", p.name, startTimeout, p.log, tail(p.log, 40))
		case <-tick.C:
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
