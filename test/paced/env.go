package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// token is the bearer token the hook server is given and every call sends.
const token = "paced-token-0123456789abcdef"

// flushFor is how long a round waits after its last answer before it reads
// the CPU, so that the hook server's hand-off linger (1 s) has posted
// what it held.
const flushFor = 2 * time.Second

// env is what both servers share: a serving certificate, a token file, a
// client that trusts the certificate, and a reporter stub.
type env struct {
	dir, cert, key, tokens string
	roots                  *x509.CertPool
	reporter               *http.Server
	reporterURL            string
	handoffs               atomic.Int64
}

func newEnv(dir string) (*env, error) {
	e := &env{dir: dir, cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), tokens: filepath.Join(dir, "tokens")}
	if err := e.writeCertificate(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.tokens, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.reporterURL = "http://" + ln.Addr().String()
	e.reporter = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e.handoffs.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = e.reporter.Serve(ln) }()
	return e, nil
}

func (e *env) close() { _ = e.reporter.Close() }

// writeCertificate writes a serving certificate for 127.0.0.1, signed
// by a CA of its own that the client trusts.
func (e *env) writeCertificate() error {
	ca, err := controlplane.NewCA("paced")
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.IssueServing("paced", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	e.roots = x509.NewCertPool()
	if !e.roots.AppendCertsFromPEM(ca.CertPEM) {
		return errors.New("cannot read the CA certificate just made")
	}
	if err := os.WriteFile(e.cert, certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(e.key, keyPEM, 0o600)
}

// hooksCommand runs the hook server as deployed: TLS, the token, the
// hand-off to the reporter stub. The image flags are the ones the
// fixtures were made with.
func (e *env) hooksCommand(bin string) func(listen, metrics string) *exec.Cmd {
	return func(listen, metrics string) *exec.Cmd {
		return exec.Command(bin, "serve", "--listen", listen, "--metrics-listen", metrics,
			"--tls-cert-file", e.cert, "--tls-key-file", e.key, "--auth-token-file", e.tokens,
			"--resource-image", "formahub/formspec-resource", "--default-version", "latest",
			"--cluster-control-url", "http://formspec-ctl.formspec-system:7070",
			"--reporter-url", e.reporterURL, "--shutdown-delay", "0s")
	}
}

// trivialCommand runs the trivial hook answering with the hook server's
// answers to the fixtures the plan posts.
func (e *env) trivialCommand(bin, fixtures string) func(listen, metrics string) *exec.Cmd {
	return func(listen, metrics string) *exec.Cmd {
		return exec.Command(bin, "--listen", listen, "--metrics-listen", metrics,
			"--tls-cert-file", e.cert, "--tls-key-file", e.key,
			"--answer-like", fixtureFile(fixtures, fixtureSync, "response.json"),
			"--claim-answer-like", fixtureFile(fixtures, fixtureClaimSync, "response.json"))
	}
}

// running is a started server and the client that posts to it.
type running struct {
	spec   serverSpec
	cmd    *exec.Cmd
	client *http.Client
	base   string
	// dials counts the connections the client opened: each cost the
	// server a TLS handshake (TestScale counts Metacontroller's).
	dials atomic.Int64
}

// start starts s on free loopback ports, waits until it is ready, and
// makes its client.
func (e *env) start(s serverSpec, o options) (*running, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	r := &running{spec: s, cmd: s.command(listen, metrics), base: "https://" + listen}
	var logs bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &logs, &logs
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitReady("http://"+metrics+"/readyz", 20*time.Second); err != nil {
		r.stop()
		return nil, fmt.Errorf("%s: %w; its output: %s", s.name, err, lastLines(logs.String(), 5))
	}
	var dialer net.Dialer
	r.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: e.roots}, MaxIdleConnsPerHost: o.idle,
		// Go's transport reads 0 idle connections as its default of 2.
		DisableKeepAlives: o.idle == 0,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			r.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	return r, nil
}

func (r *running) stop() {
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
}

// measure starts the servers side by side, posts one workspace's calls to
// each so that start-up and the first use of each path are not counted
// (it times them: a new server's first calls),
// then posts the plan to all of them at once, o.rate workspaces a second,
// each server's calls a fraction of a tick after the previous server's,
// and returns the CPU each server's process spent on it, and the hand-off
// POSTs the reporter stub took. Side by side, both servers see the same
// machine: on a shared host the CPU a call costs can double from one
// minute to the next, for both.
func (e *env) measure(ctx context.Context, specs []serverSpec, plan [][]call, o options) ([]measured, int64, error) {
	servers := make([]*running, 0, len(specs))
	defer func() {
		for _, r := range servers {
			r.stop()
		}
	}()
	for _, s := range specs {
		r, err := e.start(s, o)
		if err != nil {
			return nil, 0, err
		}
		servers = append(servers, r)
	}
	// The warm-up calls are each server's first after it became ready:
	// how long they take shows what a new replica's first calls cost.
	firsts := make([]time.Duration, len(servers))
	for i, r := range servers {
		start := time.Now()
		for _, c := range plan[0] {
			if err := post(ctx, r.client, r.base, c); err != nil {
				return nil, 0, fmt.Errorf("%s: warm-up %s: %w", r.spec.name, c.path, err)
			}
		}
		firsts[i] = time.Since(start)
	}
	time.Sleep(flushFor)

	before := make([]time.Duration, len(servers))
	for i, r := range servers {
		cpu, err := processCPU(r.cmd.Process.Pid)
		if err != nil {
			return nil, 0, err
		}
		before[i] = cpu
		r.dials.Store(0)
	}
	e.handoffs.Store(0)
	failed := make([]atomic.Int64, len(servers))
	var wg sync.WaitGroup
	period := time.Second / time.Duration(o.rate)
	tick := time.NewTicker(period)
	defer tick.Stop()
	start := time.Now()
	for _, ws := range plan {
		<-tick.C
		for i, r := range servers {
			wg.Go(func() {
				time.Sleep(period * time.Duration(i) / time.Duration(len(servers)))
				// One workspace's calls follow each other, as
				// Metacontroller makes them.
				for _, c := range ws {
					if post(ctx, r.client, r.base, c) != nil {
						failed[i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(flushFor)
	out := make([]measured, len(servers))
	for i, r := range servers {
		after, err := processCPU(r.cmd.Process.Pid)
		if err != nil {
			return nil, 0, err
		}
		out[i] = measured{calls: countCalls(plan), failed: int(failed[i].Load()), handshakes: r.dials.Load(), elapsed: elapsed, cpu: after - before[i], first: firsts[i]}
	}
	return out, e.handoffs.Load(), nil
}

// post makes one call and reads its whole answer; anything but a 200 is an
// error.
func post(ctx context.Context, client *http.Client, base string, c call) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+c.path, bytes.NewReader(c.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", c.path, resp.StatusCode)
	}
	return nil
}

// processCPU is the user and system CPU a process has spent, from
// /proc/<pid>/stat (in clock ticks of 1/100 s, USER_HZ on Linux).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cannot read a server's CPU (paced needs Linux's /proc): %w", err)
	}
	return parseStatCPU(string(raw))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/<pid>/stat line; the command name before them is in parentheses
// and may hold spaces.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat line: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is the state, the 3rd field; utime is the 14th.
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat line: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc stat line: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls url until it answers 200: a bounded wait for start-up,
// not a measurement.
func waitReady(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v (%s)", within, url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
