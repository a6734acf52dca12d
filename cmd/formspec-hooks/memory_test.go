package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// memoryLimit is the hook container's memory limit in the install
// (deploy/hooks/deployment.yaml, the chart's resources.limits.memory).
const memoryLimit = 256 << 20

// cgroupV1Memory is where the cgroup v1 memory controller is mounted.
const cgroupV1Memory = "/sys/fs/cgroup/memory"

// TestWorstCaseFitsTheMemoryLimit runs formspec-hooks serve with
// GOMEMLIMIT set to the install's limit, as the Deployment sets it, and
// sends it the most expensive requests the limits allow, eight at a time
// for a while: Workspace syncs of nearly 8 MiB each, carrying as many
// ResourceClaims as a request may. Before the in-flight budget counted
// decoded requests, four such requests at once took 274 MB. Now the kernel
// never has to kill the server: every request is answered, 200 or 429 (the
// budget is full; Metacontroller retries), and the server's peak resident
// set stays under the limit, whether the limit is also its memory cgroup's
// or GOMEMLIMIT is all the server is told, and whether the eight come on
// eight HTTP/1.1 connections or as eight streams of one HTTP/2
// connection over TLS, as Metacontroller's calls to one hook do.
func TestWorstCaseFitsTheMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not starting the server under a memory limit")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	if _, err := os.Stat(filepath.Join(cgroupV1Memory, "memory.limit_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s to limit the server with: %v", cgroupV1Memory, err)
	}
	cases := map[string]struct {
		reason string
		// cgroupLimit is the limit of the server's memory cgroup; 0 leaves
		// the cgroup unlimited, there only to count.
		cgroupLimit int64
		// http2 serves TLS, and the requests come over HTTP/2.
		http2 bool
	}{
		"CgroupLimit": {reason: "As the Deployment runs it: a memory cgroup of the limit, GOMEMLIMIT set to it.", cgroupLimit: memoryLimit},
		"GOMEMLIMITAlone": {reason: "GOMEMLIMIT and no memory cgroup limit to be found (no cgroup to read in the container, a server run by hand): " +
			"the server must take the same headroom below GOMEMLIMIT."},
		"CgroupLimitHTTP2": {reason: "As the Deployment runs it, the requests as streams of one HTTP/2 connection: the budget counts each stream as it counts each request.",
			cgroupLimit: memoryLimit, http2: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			serveWorstCase(t, tc.reason, tc.cgroupLimit, tc.http2)
		})
	}
}

// serveWorstCase is one case of TestWorstCaseFitsTheMemoryLimit: the
// server in a memory cgroup of its own limited to cgroupLimit (0: not
// limited), with GOMEMLIMIT at memoryLimit, over TLS and HTTP/2 when
// http2 is set.
func serveWorstCase(t *testing.T, reason string, cgroupLimit int64, http2 bool) {
	cg := filepath.Join(cgroupV1Memory, fmt.Sprintf("formspec-memtest-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	if cgroupLimit > 0 {
		writeCgroup(t, cg, "memory.limit_in_bytes", cgroupLimit)
		// No swap to hide in: the limit is the memory there is.
		if _, err := os.Stat(filepath.Join(cg, "memory.memsw.limit_in_bytes")); err == nil {
			writeCgroup(t, cg, "memory.memsw.limit_in_bytes", cgroupLimit)
		}
	} else if l := readCgroup(t, cg, "memory.limit_in_bytes"); l < 1<<62 {
		// What the server reads as no limit (memlimit.Cgroup).
		t.Fatalf("a new memory cgroup is limited to %d bytes; want none, so that GOMEMLIMIT is the only limit the server sees", l)
	}

	bin := filepath.Join(buildBinaries(t), "formspec-hooks")
	ports := freePorts(t, 2)
	listen, metrics := ports[0], ports[1]
	args := []string{"serve", "--listen", listen, "--metrics-listen", metrics, "--default-version", "1.8.2",
		"--reporter-url", "", "--log-level", "warn", "--shutdown-delay", "0s"}
	client := &http.Client{Timeout: 60 * time.Second}
	url := "http://" + listen + "/v1/workspace/sync"
	if http2 {
		var pool *x509.CertPool
		args, pool = withServingPair(t, args)
		// Metacontroller's hook client: a clone of Go's default
		// transport, which attempts HTTP/2, with the CA bundle.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.Transport = tr
		url = "https://" + listen + "/v1/workspace/sync"
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The shell moves itself into the cgroup and then becomes the server,
	// so that the cgroup holds the server from its first byte.
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", cg, bin}, args...)...)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.Itoa(memoryLimit))
	var logs testsync.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the server's output:\n%s", logs.String())
		}
		if err := os.Remove(cg); err != nil {
			t.Errorf("cannot remove the cgroup %s: %v", cg, err)
		}
	})
	testsync.WaitFor(t, "the server to be ready", func() bool {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	body := manyClaims(t, workspace.MaxRelatedClaims-3, 6000)
	const workers, rounds = 8, 6
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				what := "no answer"
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					what = strconv.Itoa(resp.StatusCode)
					if http2 && resp.ProtoMajor != 2 {
						what = resp.Proto
					}
				}
				mu.Lock()
				codes[what]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	// The cgroup's own peak is not the server's: it counts page cache the
	// server read, but not the binary's pages, which are charged to the
	// cgroup that wrote them (the build's). The server's peak resident set
	// is what must fit.
	peak := peakRSS(t, cmd.Process.Pid)
	oom := readCgroupFile(t, cg, "memory.oom_control")
	client.CloseIdleConnections()
	proto := "HTTP/1.1"
	if http2 {
		proto = "HTTP/2"
	}
	t.Logf("%d requests of %d bytes over %s, %d at a time: answers %v; peak RSS %.1f MiB under a %d MiB limit (cgroup peak %.1f MiB)",
		workers*rounds, len(body), proto, workers, codes, float64(peak)/(1<<20), memoryLimit>>20, float64(readCgroup(t, cg, "memory.max_usage_in_bytes"))/(1<<20))
	if strings.Contains(oom, "oom_kill ") && !strings.Contains(oom, "oom_kill 0") {
		t.Errorf("%s\nthe kernel killed in the cgroup:\n%s\nserver log:\n%s", reason, oom, logs.String())
	}
	if n := codes["no answer"]; n > 0 || codes["200"] == 0 {
		t.Errorf("%s\nanswers %v: want every request answered (200, or 429 while the budget is full) and some 200s\nserver log:\n%s", reason, codes, logs.String())
	}
	for code := range codes {
		if code != "200" && code != "429" {
			t.Errorf("%s\nanswer %s to a request within the limits; want 200 or 429", reason, code)
		}
	}
	if peak >= memoryLimit {
		t.Errorf("%s\nthe server's resident set peaked at %d bytes, not under the %d-byte limit", reason, peak, memoryLimit)
	}
	if cmd.ProcessState != nil {
		t.Errorf("%s\nthe server exited during the test: %v", reason, cmd.ProcessState)
	}
}

// servingPair is a serving certificate for 127.0.0.1 and its key, PEM,
// and a pool that trusts the certificate.
func servingPair(t *testing.T) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	ca, err := controlplane.NewCA("formspec-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = ca.IssueServing("formspec-hooks", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return certPEM, keyPEM, pool
}

// withServingPair writes a servingPair into a temporary directory and
// returns args with the flags that serve it, and the pool that trusts it.
func withServingPair(t *testing.T, args []string) ([]string, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, pool := servingPair(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for file, content := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(file, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append(args, "--tls-cert-file", certFile, "--tls-key-file", keyFile), pool
}

func writeCgroup(t *testing.T, cg, file string, v int64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		t.Fatalf("cannot set %s: %v", file, err)
	}
}

func readCgroupFile(t *testing.T, cg, file string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cg, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func readCgroup(t *testing.T, cg, file string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(strings.TrimSpace(readCgroupFile(t, cg, file)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// peakRSS is the process's VmHWM, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
