package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/testkit/hostile"
	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"golang.org/x/net/http2"
)

// attackers are the loopback addresses the hostile tests dial from, so
// that each counts as its own client for the per-client connection cap,
// as pods on several nodes would.
var attackers = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}

// protocol is how a client reaches the hook listener.
type protocol struct {
	proto hostile.Proto
	// tls is the server's TLS configuration, nil for plain HTTP; pool
	// trusts its certificate.
	tls  *tls.Config
	pool *x509.CertPool
}

// serverTLS is a TLS configuration for the hook listener and the pool
// that trusts it.
func serverTLS(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour))
	cfg, _, err := TLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, pki.Pool
}

// protocols are the two protocols every hostile test runs over: HTTP/1.1
// in plain text, as most tests here speak it, and HTTP/2, which the
// server offers over TLS only (by ALPN).
func protocols(t *testing.T) map[string]protocol {
	tlsCfg, pool := serverTLS(t)
	return map[string]protocol{
		"HTTP1": {proto: hostile.HTTP1},
		"HTTP2": {proto: hostile.HTTP2, tls: tlsCfg, pool: pool},
	}
}

// hostPort is the host:port of a base URL.
func hostPort(url string) string { return url[strings.Index(url, "://")+3:] }

// dial opens a raw connection speaking p to the server at url, from the
// loopback address from ("" for any), closed when the test ends.
func (p protocol) dial(t *testing.T, from, url string) *hostile.Conn {
	t.Helper()
	c, err := hostile.Dialer{Proto: p.proto, From: from, Pool: p.pool}.Dial(hostPort(url))
	if err != nil {
		t.Fatalf("dialing %s over %v: %v", url, p.proto, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// client is a net/http client speaking p: over TLS, HTTP/2 when p is,
// from a clone of Go's default transport, as Metacontroller's hook client
// is made.
func (p protocol) client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if p.proto == hostile.HTTP1 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: tr}
}

// testTokens is a token file that holds t0ken.
func testTokens(t *testing.T) *filereload.Tokens {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "t0ken\n", time.Unix(1000, 0))
	return filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"})
}

// hookHeaders are the headers of a hook call without a token, announcing
// a body of n bytes.
func hookHeaders(n int) map[string]string {
	return map[string]string{"Content-Type": "application/json", "Content-Length": fmt.Sprint(n)}
}

// TestRefusalsCostNothing attacks the hook listener as a client without a
// token would: from five loopback addresses, up to the per-client cap
// each, connections announce a body under the server's limit and send one
// byte of it. Each is refused at once (401, or 404 for an unknown path),
// and the server is done with the request right after the refusal: over
// HTTP/1.1 it closes the connection; over HTTP/2 it resets the stream and
// ends the connection (GOAWAY), so that a refused client opens no more
// streams on it. It does not wait for the rest of a body nobody will
// read, which would hold the connection for the whole read timeout and,
// with enough of them, every connection the listener allows. A caller with
// the token is served while the attack goes on.
func TestRefusalsCostNothing(t *testing.T) {
	tlsCfg, pool := serverTLS(t)
	cases := map[string]struct {
		reason string
		p      protocol
	}{
		"PlainHTTP": {reason: "The refusal is closed on a plain listener.", p: protocol{proto: hostile.HTTP1}},
		"TLS":       {reason: "And on a TLS one, where each connection also cost a handshake.", p: protocol{proto: hostile.HTTP1, tls: tlsCfg, pool: pool}},
		"HTTP2":     {reason: "And over HTTP/2, where the refused stream is reset and its connection ended.", p: protocol{proto: hostile.HTTP2, tls: tlsCfg, pool: pool}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			const perClient = 16
			hookURL, _, _ := startServer(t, Config{
				Routes: echoRoutes(),
				Tokens: testTokens(t),
				TLS:    tc.p.tls,
				HTTP:   httpserve.Config{Conns: httpserve.ConnLimits{Max: len(attackers) * perClient, PerClient: perClient}},
			})

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
						conn, err := hostile.Dialer{Proto: tc.p.proto, From: from, Pool: tc.p.pool}.Dial(hostPort(hookURL))
						if err != nil {
							results <- outcome{problem: err.Error()}
							return
						}
						defer conn.Close()
						s, err := conn.Send(http.MethodPost, path, hookHeaders(200000), "{", false)
						if err != nil {
							results <- outcome{problem: err.Error()}
							return
						}
						// A liveness bound only.
						status, err := s.Status(20 * time.Second)
						if err != nil {
							results <- outcome{problem: "no answer: " + err.Error()}
							return
						}
						o := outcome{status: fmt.Sprint(status)}
						// Without the fix the server reads on for the rest of
						// the body until its 30 s read timeout; 5 s is a
						// liveness bound well short of that.
						if !s.Ended(5*time.Second) || !conn.Closed(5*time.Second) {
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

			code, _ := postWith(t, tc.p.client(), hookURL+"/v1/echo/sync", validBody, map[string]string{"Authorization": "Bearer t0ken"})
			if code != http.StatusOK {
				t.Errorf("%s\nthe caller with the token: code %d, want 200", tc.reason, code)
			}
		})
	}
}

// TestRefusedStreamsCostAConnection opens stream after stream on one
// HTTP/2 connection without a token, never waiting for an answer: the
// first refusal ends the connection (GOAWAY), so the server answers no
// more than the streams the client had opened by then, at most the
// connection's stream cap (give or take the few it reads while the
// GOAWAY waits to be written), and resets or ignores the rest; to be refused
// again the client must connect again, under the connection caps, as over
// HTTP/1.1, where each refusal closes its connection
// (TestRefusalsCostNothing). Streams without a body are refused alike.
func TestRefusedStreamsCostAConnection(t *testing.T) {
	p := protocols(t)["HTTP2"]
	const streams = 8
	hookURL, _, _ := startServer(t, Config{
		Routes: echoRoutes(),
		Tokens: testTokens(t),
		TLS:    p.tls,
		HTTP:   httpserve.Config{Conns: httpserve.ConnLimits{Streams: streams}},
	})
	cases := map[string]struct {
		reason string
		header map[string]string
		body   string
	}{
		"WithBody": {reason: "Each stream announces a body and sends a byte of it.", header: hookHeaders(1000), body: "{"},
		"NoBody":   {reason: "Each stream ends with its headers.", header: map[string]string{"Content-Type": "application/json"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			conn := p.dial(t, "", hookURL)
			var sent []*hostile.Stream
			for range 200 {
				s, err := conn.Send(http.MethodPost, "/v1/echo/sync", tc.header, tc.body, tc.body == "")
				if err != nil {
					// The server has closed the connection.
					break
				}
				sent = append(sent, s)
			}
			if code, ok := conn.GoAway(5 * time.Second); !ok {
				t.Fatalf("%s\nno GOAWAY after %d refused streams", tc.reason, len(sent))
			} else if code != 0 {
				t.Errorf("%s\nGOAWAY %v, want NO_ERROR: the connection ends gracefully", tc.reason, code)
			}
			if !conn.Closed(5 * time.Second) {
				t.Errorf("%s\nthe connection stayed open after its GOAWAY", tc.reason)
			}
			answered := 0
			for _, s := range sent {
				if code, err := s.Status(0); err == nil {
					answered++
					if code != http.StatusUnauthorized {
						t.Errorf("%s\na stream answered %d, want 401", tc.reason, code)
					}
				}
			}
			// The streams the server had taken when its GOAWAY went out
			// are answered; that is at most the stream cap, give or
			// take the few it reads while the GOAWAY waits to be
			// written, never the connection's worth.
			if answered == 0 || answered > 2*streams {
				t.Errorf("%s\n%d of %d streams answered on one connection, want 1 to about %d (the stream cap)", tc.reason, answered, len(sent), streams)
			}
		})
	}
}

// TestRefusalsAreCountedNotLogged sends a flood of requests with no token
// and with a wrong one: every one is counted by reason, and the log holds
// a line now and then, not one per request.
func TestRefusalsAreCountedNotLogged(t *testing.T) {
	var logs testsync.Buffer
	hookURL, metricsURL, _ := startServer(t, Config{
		Routes: echoRoutes(),
		Tokens: testTokens(t),
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

// TestProbesAnswerUnderAttack fills a listener, up to its connection cap,
// from five loopback addresses: the metrics listener, which the install
// opens to every namespace, with HTTP/1.1 connections whose headers never
// end; and the hook listener with HTTP/2 connections, each carrying
// requests whose bodies never come, every one of them counted against
// the caps. The kubelet's probes, on the probe listener, are still
// answered within its timeout, because nothing that reaches the other
// listeners can fill it.
func TestProbesAnswerUnderAttack(t *testing.T) {
	const perClient = 32
	protos := protocols(t)
	cases := map[string]struct {
		reason string
		p      protocol
		// attacked is the listener attacked: "metrics" or "hooks".
		attacked string
		// streams is how many requests each HTTP/2 connection carries;
		// the connection counts once for each against the caps.
		streams int
	}{
		"MetricsHTTP1": {reason: "Headers that never end hold each connection for the header timeout.", p: protos["HTTP1"], attacked: "metrics"},
		"HooksHTTP2":   {reason: "Bodies that never come hold each stream for the body timeout.", p: protos["HTTP2"], attacked: "hooks", streams: 8},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := serveOnLoopback(t, Config{
				Routes: echoRoutes(),
				TLS:    tc.p.tls,
				HTTP:   httpserve.Config{Conns: httpserve.ConnLimits{Max: len(attackers) * perClient, PerClient: perClient}},
			}, true)
			target := map[string]string{"metrics": u.metrics, "hooks": u.hooks}[tc.attacked]
			held, slots := 0, max(1, tc.streams)
			for _, from := range attackers {
				for range perClient / slots {
					c := tc.p.dial(t, from, target)
					if tc.p.proto == hostile.HTTP1 {
						fmt.Fprintf(c.Raw(), "GET /metrics HTTP/1.1\r\nHost: x\r\n")
						held++
						continue
					}
					for range tc.streams {
						if _, err := c.Send(http.MethodPost, "/v1/echo/sync", hookHeaders(1000), "{", false); err != nil {
							t.Fatal(err)
						}
					}
					held += tc.streams
				}
			}
			if tc.streams > 0 {
				// Every request is in its handler, reading its body,
				// each holding a 4 KiB buffer of the in-flight budget.
				want := fmt.Sprintf("formspec_hooks_in_flight_request_bytes %d\n", held*4096)
				testsync.WaitFor(t, want, func() bool {
					_, scrape := get(t, http.DefaultClient, u.metrics+"/metrics")
					return strings.Contains(scrape, want)
				})
			}
			// The listener is full now: a request on a new connection
			// there would wait.
			blocked := tc.p.client()
			blocked.Timeout = 300 * time.Millisecond
			if resp, err := blocked.Get(target + "/healthz"); err == nil {
				resp.Body.Close()
				t.Fatalf("the %s listener still answers (%d); the attack did not fill it, so the test shows nothing", tc.attacked, resp.StatusCode)
			}

			probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			var took []time.Duration
			for i := range 40 {
				path := []string{"/healthz", "/readyz"}[i%2]
				start := time.Now()
				resp, err := probe.Get(u.probes + path)
				if err != nil {
					t.Fatalf("%s\nprobe %d (%s) beside the attack: %v (the kubelet's default timeout is 1 s)", tc.reason, i, path, err)
				}
				resp.Body.Close()
				took = append(took, time.Since(start))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("probe %d (%s): code %d, want 200", i, path, resp.StatusCode)
				}
			}
			// Each probe was answered within the kubelet's 1 s timeout;
			// how fast is a figure, not an assertion.
			slices.Sort(took)
			t.Logf("40 probes beside %d requests held on the %s listener: median %v, max %v", held, tc.attacked, took[len(took)/2], took[len(took)-1])

			for _, p := range []string{"/metrics", "/v1/echo/sync"} {
				if code, _ := get(t, http.DefaultClient, u.probes+p); code != http.StatusNotFound {
					t.Errorf("GET %s on the probe listener: code %d, want 404: it answers the probes only", p, code)
				}
			}
		})
	}
}

// stuckHook holds every call until released, whatever its context says:
// the worst a hook can do to a client that resets its streams.
type stuckHook struct {
	entered chan struct{}
	release chan struct{}
}

func newStuckHook() *stuckHook {
	return &stuckHook{entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (h *stuckHook) hook(context.Context, *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	h.entered <- struct{}{}
	<-h.release
	return &metacontroller.CompositeResponse{Status: map[string]any{}, Children: []any{}}, nil
}

// waitEntered waits until n calls have entered h, and reports whether
// more entered than that within a little while after.
func (h *stuckHook) waitEntered(t *testing.T, n int) (more bool) {
	t.Helper()
	for i := range n {
		select {
		case <-h.entered:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d calls entered the hook", i, n)
		}
	}
	select {
	case <-h.entered:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// serveStuck serves /v1/stuck/sync (a stuckHook), and more routes, over
// TLS with conns as the connection caps, and returns the HTTP/2 protocol
// to reach it.
func serveStuck(t *testing.T, conns httpserve.ConnLimits, more ...Route) (protocol, *stuckHook, served) {
	t.Helper()
	p := protocols(t)["HTTP2"]
	stuck := newStuckHook()
	u := serveOnLoopback(t, Config{
		Routes: append([]Route{HookRoute("/v1/stuck/sync", stuck.hook)}, more...),
		TLS:    p.tls,
		HTTP:   httpserve.Config{Conns: conns},
	}, false)
	return p, stuck, u
}

// sendCalls sends n whole hook calls to path on conn, without waiting
// for their answers.
func sendCalls(t *testing.T, conn *hostile.Conn, path string, n int) []*hostile.Stream {
	t.Helper()
	var sent []*hostile.Stream
	for range n {
		s, err := conn.Send(http.MethodPost, path, hookHeaders(len(validBody)), validBody, true)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, s)
	}
	return sent
}

// wantAnswered checks that each of streams is answered code.
func wantAnswered(t *testing.T, what string, streams []*hostile.Stream, code int) {
	t.Helper()
	for i, s := range streams {
		// A liveness bound only.
		if got, err := s.Status(20 * time.Second); err != nil || got != code {
			t.Errorf("%s %d: %d, %v; want %d", what, i, got, err, code)
		}
	}
}

// TestStreamsPerConnection opens more streams on one HTTP/2 connection
// than the server announces, each a whole hook call: as many as the
// connection's cap reach their hook at once, the others are refused
// (RST_STREAM) before any handler runs; the ones served are answered.
func TestStreamsPerConnection(t *testing.T) {
	const streams = 6
	p, stuck, u := serveStuck(t, httpserve.ConnLimits{Streams: streams})
	conn := p.dial(t, "", u.hooks)
	if n, ok := conn.MaxStreams(); !ok || n != streams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d (seen %v), want %d", n, ok, streams)
	}
	sent := sendCalls(t, conn, "/v1/stuck/sync", streams+3)
	if stuck.waitEntered(t, streams) {
		t.Errorf("more than %d calls entered the hook at once on one connection", streams)
	}
	refused := 0
	for _, s := range sent[streams:] {
		if s.Ended(5 * time.Second) {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d of the 3 streams over the cap were refused", refused)
	}
	close(stuck.release)
	wantAnswered(t, "stream within the cap", sent[:streams], http.StatusOK)
}

// TestStreamsCountAgainstTheCaps holds as many requests on one HTTP/2
// connection as the per-client cap allows: the connection counts once for
// each, so the next request on it gets 429 (and the connection GOAWAY),
// and a new connection from the same client is closed at once, as the
// one past the cap would be over HTTP/1.1. Another client is served.
func TestStreamsCountAgainstTheCaps(t *testing.T) {
	const perClient = 4
	p, stuck, u := serveStuck(t, httpserve.ConnLimits{PerClient: perClient})
	hookURL, metricsURL := u.hooks, u.metrics
	conn := p.dial(t, attackers[0], hookURL)
	held := sendCalls(t, conn, "/v1/stuck/sync", perClient)
	stuck.waitEntered(t, perClient)

	wantAnswered(t, "a request over the per-client cap", sendCalls(t, conn, "/v1/stuck/sync", 1), http.StatusTooManyRequests)
	if code, ok := conn.GoAway(5 * time.Second); !ok || code != 0 {
		t.Errorf("GOAWAY after the refusal: %v (seen %v), want NO_ERROR", code, ok)
	}
	if c, err := (hostile.Dialer{Proto: p.proto, From: attackers[0], Pool: p.pool}).Dial(hostPort(hookURL)); err == nil {
		if !c.Closed(5 * time.Second) {
			t.Error("a new connection from the client at its cap stayed open")
		}
		_ = c.Close()
	}
	other := sendCalls(t, p.dial(t, attackers[1], hookURL), "/v1/stuck/sync", 1)
	stuck.waitEntered(t, 1)
	close(stuck.release)
	wantAnswered(t, "another client's request", other, http.StatusOK)
	// The GOAWAY lets the requests in progress finish.
	wantAnswered(t, "held request", held, http.StatusOK)
	want := `formspec_hooks_http2_errors_total{listener="hooks",reason="streams-per-client"} 1`
	if _, scrape := get(t, http.DefaultClient, metricsURL+"/metrics"); !strings.Contains(scrape, want+"\n") {
		t.Errorf("the metrics lack %q", want)
	}
}

// TestRapidReset sends hook calls on one HTTP/2 connection and resets
// each stream as soon as it is sent, thousands of them, as in
// CVE-2023-44487, against a hook that runs on whatever its context says:
// the server never runs more calls of that connection at once than its
// stream cap, ends the connection (GOAWAY, ENHANCE_YOUR_CALM) once the
// client has reset four times as many that wait for a handler, counts
// it, and serves another client meanwhile.
func TestRapidReset(t *testing.T) {
	const streams = 8
	p, stuck, u := serveStuck(t, httpserve.ConnLimits{Streams: streams}, HookRoute("/v1/echo/sync", echoHook))
	hookURL, metricsURL := u.hooks, u.metrics
	conn := p.dial(t, "", hookURL)
	sent := 0
	for range 5000 {
		s, err := conn.Send(http.MethodPost, "/v1/stuck/sync", hookHeaders(len(validBody)), validBody, true)
		if err != nil {
			break
		}
		if s.Reset() != nil {
			break
		}
		sent++
	}
	if code, ok := conn.GoAway(10 * time.Second); !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("after %d reset streams: GOAWAY %v (seen %v), want ENHANCE_YOUR_CALM", sent, code, ok)
	}
	if !conn.Closed(5 * time.Second) {
		t.Error("the connection stayed open after its GOAWAY")
	}
	if stuck.waitEntered(t, streams) {
		t.Errorf("more than %d calls of one connection entered the hook", streams)
	}
	if code, _ := postWith(t, p.client(), hookURL+"/v1/echo/sync", validBody, nil); code != http.StatusOK {
		t.Errorf("another client beside the attack: code %d, want 200", code)
	}
	close(stuck.release)
	want := `formspec_hooks_http2_errors_total{listener="hooks",reason="` + httpserve.HTTP2RapidReset + `"} 1`
	if _, scrape := get(t, http.DefaultClient, metricsURL+"/metrics"); !strings.Contains(scrape, want+"\n") {
		t.Errorf("the metrics lack %q", want)
	}
}
