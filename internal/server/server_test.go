package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/testkit/hostile"
	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
)

// startServer serves cfg on loopback listeners and returns their base URLs
// and a function that stops the server and returns Serve's error.
func startServer(t *testing.T, cfg Config) (hookURL, metricsURL string, stop func() error) {
	t.Helper()
	u := serveOnLoopback(t, cfg, false)
	return u.hooks, u.metrics, u.stop
}

// served are the base URLs of a server serveOnLoopback started.
type served struct {
	hooks, metrics, probes string
	stop                   func() error
}

// serveOnLoopback serves cfg on loopback listeners, with a probe listener
// when probes is set, until the test ends.
func serveOnLoopback(t *testing.T, cfg Config, probes bool) served {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	ls := Listeners{Hooks: listen(), Metrics: listen()}
	if probes {
		ls.Health = listen()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls) }()
	stopped := false
	u := served{stop: func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}}
	t.Cleanup(func() { _ = u.stop() })
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	u.hooks, u.metrics = scheme+"://"+ls.Hooks.Addr().String(), "http://"+ls.Metrics.Addr().String()
	if probes {
		u.probes = "http://" + ls.Health.Addr().String()
	}
	return u
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServeDrainsBeforeStopping(t *testing.T) {
	block := newBlockingHook()
	hookURL, metricsURL, stop := startServer(t, Config{
		Routes: []Route{HookRoute("/v1/block/sync", block.hook)},
	})
	client := &http.Client{Timeout: 10 * time.Second}

	if code, _ := get(t, client, metricsURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz before shutdown: code %d", code)
	}

	type result struct {
		code int
		body string
		err  error
	}
	inFlight := make(chan result, 1)
	go func() {
		resp, err := client.Post(hookURL+"/v1/block/sync", "application/json", strings.NewReader(validBody))
		if err != nil {
			inFlight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		inFlight <- result{code: resp.StatusCode, body: string(body)}
	}()
	<-block.entered

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// The in-flight request holds the hook listener's Shutdown, and the
	// metrics listener closes only after it, so readiness can be watched
	// failing while the request is still being served.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get(t, client, metricsURL+"/readyz")
		if code == http.StatusServiceUnavailable {
			if diff := cmp.Diff("shutting down\n", body); diff != "" {
				t.Errorf("readyz body: -want, +got:\n%s", diff)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d after shutdown began", code)
		}
		time.Sleep(time.Millisecond)
	}
	if code, _ := get(t, client, metricsURL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz while draining: code %d, want 200", code)
	}

	close(block.release)
	got := <-inFlight
	if diff := cmp.Diff(result{code: 200, body: "{\"status\":{\"done\":true},\"children\":[]}\n"}, got, cmp.AllowUnexported(result{}), cmpopts.EquateErrors()); diff != "" {
		t.Errorf("in-flight request: -want, +got:\n%s", diff)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve after a clean drain: %v", err)
	}
}

// TestDrainClosesEachConnectionAfterItsAnswer shows what keeps a roll of
// the hook Deployment from failing a call: while the server drains, each
// answer carries "Connection: close" (over HTTP/2, a GOAWAY), so the
// client opens a new connection for its next request instead of writing
// it on one the listener is about to close.
func TestDrainClosesEachConnectionAfterItsAnswer(t *testing.T) {
	for name, p := range protocols(t) {
		t.Run(name, func(t *testing.T) {
			hookURL, metricsURL, stop := startServer(t, Config{
				Routes:        []Route{HookRoute("/v1/echo/sync", echoHook)},
				ShutdownDelay: 2 * time.Second,
				TLS:           p.tls,
			})
			client := p.client()
			defer client.CloseIdleConnections()

			// answer is what one hook call saw of its connection.
			type answer struct {
				Code   int
				Reused bool // the request went on a kept-alive connection
				Close  bool // the answer said "Connection: close" (HTTP/1.1)
			}
			post := func() answer {
				t.Helper()
				var reused bool
				trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
					http.MethodPost, hookURL+"/v1/echo/sync", strings.NewReader(validBody))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("hook call: %v", err)
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				return answer{Code: resp.StatusCode, Reused: reused, Close: resp.Close}
			}

			before := []answer{post(), post()}
			if diff := cmp.Diff([]answer{{Code: 200}, {Code: 200, Reused: true}}, before); diff != "" {
				t.Errorf("before the drain, the connection is kept alive: -want, +got:\n%s", diff)
			}

			stopped := make(chan error, 1)
			go func() { stopped <- stop() }()
			deadline := time.Now().Add(time.Second)
			for code, _ := get(t, http.DefaultClient, metricsURL+"/readyz"); code != http.StatusServiceUnavailable; code, _ = get(t, http.DefaultClient, metricsURL+"/readyz") {
				if time.Now().After(deadline) {
					t.Fatalf("readyz still %d after shutdown began", code)
				}
				time.Sleep(time.Millisecond)
			}

			// The first call goes on the connection kept from before; its
			// answer closes it, and so does the answer on the next, new
			// connection. Over HTTP/2 the answer ends the connection with
			// a GOAWAY instead, and a call the client sent before it read
			// the GOAWAY may still be answered on it.
			during := []answer{post(), post()}
			want := []answer{{Code: 200, Reused: true, Close: true}, {Code: 200, Close: true}}
			if p.proto == hostile.HTTP2 {
				for len(during) < 3 && during[len(during)-1].Reused {
					during = append(during, post())
				}
				want = append(slices.Repeat([]answer{{Code: 200, Reused: true}}, len(during)-1), answer{Code: 200})
			}
			if diff := cmp.Diff(want, during); diff != "" {
				t.Errorf("while draining: -want, +got:\n%s", diff)
			}
			if err := <-stopped; err != nil {
				t.Errorf("Serve after a clean drain: %v", err)
			}
		})
	}
}

// servedSerial is tryTLS for a handshake that must succeed.
func servedSerial(t *testing.T, url string, pool *x509.CertPool) int64 {
	t.Helper()
	serial, err := tryTLS(url, pool)
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	return serial
}

// tryTLS makes a fresh connection and returns the serial number of the
// certificate the server presented.
func tryTLS(url string, pool *x509.CertPool) (int64, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get(url + "/")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

func TestTLSReloadsCertificate(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	tlsCfg, _, err := TLSConfig(certFile, keyFile, "", nil)
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	hookURL, _, _ := startServer(t, Config{TLS: tlsCfg})

	if diff := cmp.Diff(int64(100), servedSerial(t, hookURL, pki.Pool)); diff != "" {
		t.Errorf("certificate at start: -want, +got serial:\n%s", diff)
	}

	// A renewal writes new files in place, as cert-manager's volume does.
	pki.Issue(t, "server", 101, x509.ExtKeyUsageServerAuth, time.Unix(2000, 0))
	if diff := cmp.Diff(int64(101), servedSerial(t, hookURL, pki.Pool)); diff != "" {
		t.Errorf("certificate after renewal: -want, +got serial:\n%s", diff)
	}

	// A broken pair (the key not yet written) fails closed: no handshake
	// with a certificate that no longer matches what the files say.
	writeFile(t, keyFile, "not a key", time.Unix(3000, 0))
	if _, err := tryTLS(hookURL, pki.Pool); err == nil {
		t.Errorf("handshake succeeded while the key file was broken")
	}
	// The next renewal is served again, without a restart.
	pki.Issue(t, "server", 102, x509.ExtKeyUsageServerAuth, time.Unix(4000, 0))
	if diff := cmp.Diff(int64(102), servedSerial(t, hookURL, pki.Pool)); diff != "" {
		t.Errorf("certificate after the broken pair was fixed: -want, +got serial:\n%s", diff)
	}
}

func TestMutualTLS(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	_, _, clientCert := pki.Issue(t, "metacontroller", 200, x509.ExtKeyUsageClientAuth, time.Unix(1000, 0))
	tlsCfg, _, err := TLSConfig(certFile, keyFile, pki.CAFile, nil)
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	hookURL, metricsURL, _ := startServer(t, Config{TLS: tlsCfg})

	cases := map[string]struct {
		reason string
		certs  []tls.Certificate
		want   error
	}{
		"NoClientCertificate": {reason: "Under mTLS a client without a certificate is refused: the server ends the handshake with the alert that says so.",
			want: remoteAlert("tls: certificate required")},
		"ClientCertificate": {reason: "A certificate from the client CA is accepted.", certs: []tls.Certificate{clientCert}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pki.Pool, Certificates: tc.certs, MinVersion: tls.VersionTLS12},
			}}
			resp, err := client.Get(hookURL + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	// The kubelet probes the plain metrics listener, which has no mTLS.
	if code, _ := get(t, http.DefaultClient, metricsURL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz on the metrics listener: code %d, want 200", code)
	}
}

// remoteAlert is the TLS alert a peer ended the handshake with, as the
// error a client gets: it matches an error whose chain holds that alert
// received, so that a refusal is told from a network failure or a timeout
// (crypto/tls does not export the type of a received alert).
type remoteAlert string

func (a remoteAlert) Error() string { return "remote error: " + string(a) }

// Is reports whether target holds the alert a, received from the peer.
func (a remoteAlert) Is(target error) bool {
	var op *net.OpError
	return errors.As(target, &op) && op.Op == "remote error" && op.Err != nil && op.Err.Error() == string(a)
}

// TestMutualTLSReloadsClientCA rotates the client CA: a client whose
// certificate comes from a new CA is refused until the CA file holds the new
// CA, then accepted without a restart.
func TestMutualTLSReloadsClientCA(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	caFile := filepath.Join(pki.Dir, "client-ca.crt")
	testpki.WritePEM(t, caFile, "CERTIFICATE", pki.CA.Raw, time.Unix(1000, 0))
	tlsCfg, _, err := TLSConfig(certFile, keyFile, caFile, nil)
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	hookURL, _, _ := startServer(t, Config{TLS: tlsCfg})

	next := testpki.New(t)
	_, _, clientCert := next.Issue(t, "metacontroller", 300, x509.ExtKeyUsageClientAuth, time.Unix(1000, 0))
	try := func() error {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		}}
		resp, err := client.Get(hookURL + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := try(); err == nil {
		t.Fatal("a client certificate from a CA not yet in the file was accepted")
	}
	testpki.WritePEM(t, caFile, "CERTIFICATE", next.CA.Raw, time.Unix(2000, 0))
	if err := try(); err != nil {
		t.Errorf("after the CA file was rotated: %v, want the new client accepted", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	notPEM := filepath.Join(pki.Dir, "not-pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason             string
		cert, key, cliCA   string
		want               error
		wantClientVerified bool
	}{
		"NoKey":       {reason: "A certificate needs its key.", cert: certFile, want: cmpopts.AnyError},
		"MissingCert": {reason: "Files that do not exist stop the server at start.", cert: filepath.Join(pki.Dir, "nope"), key: keyFile, want: cmpopts.AnyError},
		"SwappedPair": {reason: "A key file that is not a key stops the server at start.", cert: certFile, key: certFile, want: cmpopts.AnyError},
		"BadClientCA": {reason: "A client CA file without certificates would reject everyone.", cert: certFile, key: keyFile, cliCA: notPEM, want: cmpopts.AnyError},
		"ServerOnly":  {reason: "Without a client CA, clients are not asked for certificates.", cert: certFile, key: keyFile},
		"Mutual":      {reason: "With a client CA, client certificates are required and verified.", cert: certFile, key: keyFile, cliCA: pki.CAFile, wantClientVerified: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := TLSConfig(tc.cert, tc.key, tc.cliCA, nil)
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.wantClientVerified, cfg.ClientAuth == tls.RequireAndVerifyClientCert); diff != "" {
				t.Errorf("%s\nclient certificates verified: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
