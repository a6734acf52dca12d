package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// built is the formspec-reporter binary, built once for the tests that
// run it as a process.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// reporterBinary returns the path of the built formspec-reporter, building
// it on first use; TestMain removes it.
func reporterBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building and starting the reporter binary")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "formspec-reporter-test-"); built.err != nil {
			return
		}
		if out, err := exec.Command("go", "build", "-o", built.dir+"/", ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "formspec-reporter")
}

// proxy stands in for every host off the loopback the reporter is pointed
// at: the process gets it as HTTP_PROXY and HTTPS_PROXY, so that a call to
// 10.0.0.1 reaches this listener on the loopback and nothing leaves the
// machine. It answers 502 and remembers the hosts asked for.
type proxy struct {
	url   string
	mu    sync.Mutex
	hosts map[string]bool
}

func startProxy(t *testing.T) *proxy {
	t.Helper()
	p := &proxy{hosts: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.hosts[r.Host] = true
		p.mu.Unlock()
		http.Error(w, "test proxy: nothing beyond the loopback", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *proxy) asked(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts[host]
}

// env is the reporter's environment: every call off the loopback through
// p, and no in-cluster Kubernetes configuration.
func (p *proxy) env() []string {
	return []string{"HTTP_PROXY=" + p.url, "HTTPS_PROXY=" + p.url, "http_proxy=" + p.url, "https_proxy=" + p.url,
		"NO_PROXY=", "no_proxy=", "KUBERNETES_SERVICE_HOST="}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// startReporter runs the binary with a token file and the loopback
// listeners, plus args, and waits for its metrics to answer.
func startReporter(t *testing.T, p *proxy, args ...string) (metrics string, logPath string) {
	t.Helper()
	bin := reporterBinary(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("reporter-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics = "127.0.0.1:" + fmt.Sprint(controlplane.FreePorts(t, 1)[0])
	proc := controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: dir, Env: p.env()}, bin,
		append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", metrics, "--token-file", token}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitReady(ctx, func() bool { _, err := scrape(metrics); return err == nil }); err != nil {
		t.Fatalf("the reporter did not start: %v", err)
	}
	return metrics, proc.LogPath()
}

func scrape(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(body), err
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPlainHTTPBinary starts the reporter binary with a token file and
// Cluster Control over plain HTTP or https, on and off the loopback: the
// token over plain HTTP off the loopback takes --insecure-http (without
// it the binary exits 2: TestCommandLineConventions in cmd/formspec-hooks),
// which is announced by a warning at start and the
// formspec_reporter_insecure_http gauge. Calls off the loopback go to a
// stand-in proxy on the loopback.
func TestPlainHTTPBinary(t *testing.T) {
	const warning = "--insecure-http: the bearer token goes to Cluster Control in plain HTTP"
	cases := map[string]struct {
		reason string
		url    string
		args   []string
		// gauge is formspec_reporter_insecure_http; warn is whether the
		// warning is logged.
		gauge string
		warn  bool
	}{
		"PlainHTTPWithInsecureFlag": {
			reason: "--insecure-http starts it, says so at start and keeps the gauge at 1.",
			url:    "http://10.0.0.1:7070", args: []string{"--insecure-http"}, gauge: "1", warn: true,
		},
		"LoopbackNeedsNoFlag": {
			reason: "Plain HTTP on the loopback (make run's demo) crosses no network: no flag, no warning.",
			url:    "http://" + closedPort(t), gauge: "0",
		},
		"HTTPSNeedsNoFlag": {
			reason: "https needs nothing.",
			url:    "https://10.0.0.1:7443", gauge: "0",
		},
		"HTTPSWithInsecureFlag": {
			reason: "--insecure-http where nothing goes in clear changes nothing and is not announced.",
			url:    "https://10.0.0.1:7443", args: []string{"--insecure-http"}, gauge: "0",
		},
	}
	gaugeLine := regexp.MustCompile(`(?m)^formspec_reporter_insecure_http (\S+)$`)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := startProxy(t)
			metrics, logPath := startReporter(t, p, append([]string{"--cluster-control-url", tc.url}, tc.args...)...)
			body, err := scrape(metrics)
			if err != nil {
				t.Fatal(err)
			}
			m := gaugeLine.FindStringSubmatch(body)
			if m == nil || m[1] != tc.gauge {
				t.Errorf("%s\nformspec_reporter_insecure_http: got %v, want %s", tc.reason, m, tc.gauge)
			}
			if got := strings.Contains(readLog(t, logPath), warning); got != tc.warn {
				t.Errorf("%s\nwarning %q logged: got %v, want %v\nlog:\n%s", tc.reason, warning, got, tc.warn, readLog(t, logPath))
			}
			if host := strings.TrimPrefix(strings.TrimPrefix(tc.url, "http://"), "https://"); !strings.HasPrefix(host, "127.") {
				// The deploy-status poll starts at once: it must have gone
				// to the stand-in, which proves nothing left the machine.
				testsync.WaitFor(t, "the call to "+host+" at the stand-in proxy", func() bool { return p.asked(host) })
			}
		})
	}
}

// TestFailedCallLogsOrigin starts the reporter binary against a loopback
// port nothing listens on, with a path in the URL: the failed calls'
// log lines, and the starting line, name Cluster Control by scheme and
// host alone. Go's url.Error quotes the whole request URL, path and query
// included, which is where a credential pasted into a URL would show.
func TestFailedCallLogsOrigin(t *testing.T) {
	addr := closedPort(t)
	origin := "http://" + addr
	_, logPath := startReporter(t, startProxy(t), "--cluster-control-url", origin+"/tenant-a-3f9c")
	var line string
	testsync.WaitFor(t, "a failed call to be logged", func() bool {
		for l := range strings.Lines(readLog(t, logPath)) {
			if strings.Contains(l, "cluster control call failed") {
				line = l
				return true
			}
		}
		return false
	})
	for _, l := range []string{line, startingLine(readLog(t, logPath))} {
		if !strings.Contains(l, origin) {
			t.Errorf("log line does not name Cluster Control's scheme and host %s:\n%s", origin, l)
		}
		for _, path := range []string{"tenant-a-3f9c", "/v1/"} {
			if strings.Contains(l, path) {
				t.Errorf("log line repeats %q of the URL's path:\n%s", path, l)
			}
		}
	}
}

// startingLine is the "reporter starting" line of log.
func startingLine(log string) string {
	for l := range strings.Lines(log) {
		if strings.Contains(l, "reporter starting") {
			return l
		}
	}
	return ""
}
