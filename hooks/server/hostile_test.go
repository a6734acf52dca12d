package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
	"github.com/formspec/formspec-hooks/hooks/internal/testpki"
	"github.com/formspec/formspec-hooks/hooks/testsync"
)

// attackers are the loopback addresses the hostile tests dial from, so
// that each counts as its own client for the per-client connection cap,
// as pods on several nodes would.
var attackers = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}

// dialFrom opens a connection to addr from the loopback address from,
// over TLS when pool is set.
func dialFrom(from, addr string, pool *x509.CertPool) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	if pool == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(&d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
}

// closedSoon reports whether the server closes conn, after whatever it
// has already sent, within bound: a read then ends in EOF or a reset
// rather than in the deadline.
func closedSoon(conn net.Conn, bound time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// TestRefusalsCostNothing attacks the hook listener as a client without a
// token would: from five loopback addresses, up to the per-client cap
// each, connections announce a body under the server's limit and send one
// byte of it. Each is refused at once (401, or 404 for an unknown path),
// and the connection is closed right after the refusal: the server does
// not wait for the rest of a body nobody will read, which would hold the
// connection for the whole read timeout and, with enough of them, every
// connection the listener allows. A caller with the token is served while
// the attack goes on.
func TestRefusalsCostNothing(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour))
	tlsCfg, _, err := TLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		tls    *tls.Config
		pool   *x509.CertPool
	}{
		"PlainHTTP": {reason: "The refusal is closed on a plain listener."},
		"TLS":       {reason: "And on a TLS one, where each connection also cost a handshake.", tls: tlsCfg, pool: pki.Pool},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			writeFile(t, path, "t0ken\n", time.Unix(1000, 0))
			const perClient = 16
			hookURL, _, _ := startServer(t, Config{
				Routes: echoRoutes(),
				Tokens: filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"}),
				TLS:    tc.tls,
				HTTP:   httpserve.Config{Conns: httpserve.ConnLimits{Max: len(attackers) * perClient, PerClient: perClient}},
			})
			addr := hookURL[strings.Index(hookURL, "://")+3:]

			type outcome struct{ status, problem string }
			results := make(chan outcome, len(attackers)*perClient)
			// Each attacker keeps its connection until the test is done
			// with the caller below, so that a connection the server did
			// not close still takes its place under the cap.
			hold := make(chan struct{})
			var wg, held sync.WaitGroup
			want := map[string]int{}
			for i, from := range attackers {
				for j := range perClient {
					path, code := "/v1/echo/sync", "401"
					if (i+j)%2 == 1 {
						path, code = "/v1/nope/sync", "404"
					}
					want[code]++
					wg.Add(1)
					held.Add(1)
					go func() {
						defer held.Done()
						defer func() { <-hold }()
						defer wg.Done()
						conn, err := dialFrom(from, addr, tc.pool)
						if err != nil {
							results <- outcome{problem: err.Error()}
							return
						}
						defer conn.Close()
						fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{", path)
						_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
						line, err := bufio.NewReader(conn).ReadString('\n')
						if err != nil {
							results <- outcome{problem: "no answer: " + err.Error()}
							return
						}
						o := outcome{status: strings.Fields(line)[1]}
						// Without the fix the server reads on for the rest of
						// the body until its 30 s read timeout; 5 s is a
						// liveness bound well short of that.
						if !closedSoon(conn, 5*time.Second) {
							o.problem = "the connection stayed open after the refusal"
						}
						results <- o
					}()
				}
			}
			wg.Wait()
			defer held.Wait()
			defer close(hold)
			close(results)
			got := map[string]int{}
			for o := range results {
				if o.problem != "" {
					got[o.problem]++
					continue
				}
				got[o.status]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s\nrefused connections: got %v, want %v", tc.reason, got, want)
			}

			client := &http.Client{Timeout: 10 * time.Second}
			if tc.pool != nil {
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tc.pool, MinVersion: tls.VersionTLS12}}
			}
			req, _ := http.NewRequest(http.MethodPost, hookURL+"/v1/echo/sync", strings.NewReader(validBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer t0ken")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s\nthe caller with the token: %v", tc.reason, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s\nthe caller with the token: code %d, want 200", tc.reason, resp.StatusCode)
			}
		})
	}
}

// TestRefusalsAreCountedNotLogged sends a flood of requests with no token
// and with a wrong one: every one is counted by reason, and the log holds
// a line now and then, not one per request.
func TestRefusalsAreCountedNotLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "t0ken\n", time.Unix(1000, 0))
	var logs testsync.Buffer
	hookURL, metricsURL, _ := startServer(t, Config{
		Routes: echoRoutes(),
		Tokens: filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"}),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	const flood = 300
	for i := range flood {
		header := map[string]string{}
		if i%3 == 0 {
			header["Authorization"] = "Bearer wrong"
		}
		if code, _ := post(t, hookURL+"/v1/echo/sync", validBody, header); code != http.StatusUnauthorized {
			t.Fatalf("request %d: code %d, want 401", i, code)
		}
	}
	_, scrape := get(t, http.DefaultClient, metricsURL+"/metrics")
	for _, want := range []string{
		`formspec_hooks_auth_failures_total{reason="invalid"} 100`,
		`formspec_hooks_auth_failures_total{reason="missing"} 200`,
		`formspec_hooks_auth_failures_total{reason="unavailable"} 0`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("the metrics lack %q", want)
		}
	}
	if n := strings.Count(logs.String(), `msg="hook request"`); n > 2 {
		t.Errorf("%d refused requests wrote %d request lines, want at most 2 in the log interval:\n%s", flood, n, logs.String())
	}
}

// TestHandshakeFailuresAreCounted is a CA rotation that missed a client:
// its handshakes fail, and the server's metrics say so by reason.
func TestHandshakeFailuresAreCounted(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour))
	tlsCfg, _, err := TLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	hookURL, metricsURL, _ := startServer(t, Config{Routes: echoRoutes(), TLS: tlsCfg})
	addr := strings.TrimPrefix(hookURL, "https://")
	for range 5 {
		if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}); err == nil {
			conn.Close()
			t.Fatal("a client without the CA completed a handshake")
		}
	}
	want := `formspec_hooks_tls_handshake_errors_total{listener="hooks",reason="rejected-by-client"} 5`
	testsync.WaitFor(t, want, func() bool {
		_, scrape := get(t, http.DefaultClient, metricsURL+"/metrics")
		return strings.Contains(scrape, want+"\n")
	})
}

// TestProbesAnswerUnderAttack fills the metrics listener, which the
// install opens to every namespace, with connections from five loopback
// addresses that announce a body and never send it, up to its connection
// cap: the kubelet's probes, on the probe listener, are still answered
// within its timeout, because nothing that reaches the other listeners can
// fill it.
func TestProbesAnswerUnderAttack(t *testing.T) {
	const perClient = 32
	u := serveOnLoopback(t, Config{
		Routes: echoRoutes(),
		HTTP:   httpserve.Config{Conns: httpserve.ConnLimits{Max: len(attackers) * perClient, PerClient: perClient}},
	}, true)
	metricsAddr := strings.TrimPrefix(u.metrics, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, from := range attackers {
		for range perClient {
			c, err := dialFrom(from, metricsAddr, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Headers that never end: the connection is held for the
			// header timeout.
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n")
			conns = append(conns, c)
		}
	}
	// The metrics listener is full now: a probe there would wait.
	blocked := &http.Client{Timeout: 300 * time.Millisecond}
	if _, err := blocked.Get(u.metrics + "/healthz"); err == nil {
		t.Fatal("the metrics listener still answers; the attack did not fill it, so the test shows nothing")
	}

	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var took []time.Duration
	for i := range 40 {
		path := []string{"/healthz", "/readyz"}[i%2]
		start := time.Now()
		resp, err := probe.Get(u.probes + path)
		if err != nil {
			t.Fatalf("probe %d (%s) beside the attack: %v (the kubelet's default timeout is 1 s)", i, path, err)
		}
		resp.Body.Close()
		took = append(took, time.Since(start))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %d (%s): code %d, want 200", i, path, resp.StatusCode)
		}
	}
	// Each probe was answered within the kubelet's 1 s timeout; how fast
	// is a figure, not an assertion.
	slices.Sort(took)
	t.Logf("40 probes beside %d held connections: median %v, max %v", len(conns), took[len(took)/2], took[len(took)-1])

	for _, p := range []string{"/metrics", "/v1/echo/sync"} {
		if code, _ := get(t, http.DefaultClient, u.probes+p); code != http.StatusNotFound {
			t.Errorf("GET %s on the probe listener: code %d, want 404: it answers the probes only", p, code)
		}
	}
}
