package httpserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/hostile"
	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// tlsServing is a serving configuration and the pool that trusts it.
func tlsServing(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	pki := testpki.New(t)
	_, _, cert := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour))
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, pki.Pool
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

// TestHTTP2FirstRequest: an HTTP/2 connection that starts no request
// within the header timeout of its preface is closed, as an HTTP/1.1 one
// that sends no headers is; one that does start a request is served and
// then kept, idle, like any other.
func TestHTTP2FirstRequest(t *testing.T) {
	tlsCfg, pool := tlsServing(t)
	addr, _ := serve(t, okHandler, Config{TLS: tlsCfg, ReadHeaderTimeout: 200 * time.Millisecond})
	dialer := hostile.Dialer{Proto: hostile.HTTP2, Pool: pool}

	silent, err := dialer.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A liveness bound, well past the header timeout.
	if !silent.Closed(10 * time.Second) {
		t.Error("a connection that started no request stayed open")
	}

	talking, err := dialer.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer talking.Close()
	s, err := talking.Send(http.MethodGet, "/", nil, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := s.Status(10 * time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("the first request: %d, %v", code, err)
	}
	if talking.Closed(time.Second) {
		t.Error("a connection closed, idle, within a second after its first request: the header timeout is for the first request only")
	}
}

// TestHTTP2IdleCap: HTTP/2 connections without a request in progress are
// idle, and the idle cap closes those beyond it, as for HTTP/1.1
// (TestConnLimitsIdle), once the last answer is out; a connection that
// has not started its first request is not idle yet, so a new client is
// not closed at once by others' idle connections.
func TestHTTP2IdleCap(t *testing.T) {
	tlsCfg, pool := tlsServing(t)
	addr, _ := serve(t, okHandler, Config{TLS: tlsCfg, Conns: ConnLimits{Idle: 1}})
	dialer := hostile.Dialer{Proto: hostile.HTTP2, Pool: pool}
	request := func(c *hostile.Conn) {
		t.Helper()
		s, err := c.Send(http.MethodGet, "/", nil, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := s.Status(10 * time.Second); err != nil || code != http.StatusOK {
			t.Fatalf("a request: %d, %v", code, err)
		}
	}
	first, err := dialer.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	request(first)
	// The first is idle now; a new connection is not, and is served.
	second, err := dialer.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	request(second)
	// The second, over the cap, is closed a second after its answer.
	got := []bool{first.Closed(500 * time.Millisecond), second.Closed(5 * time.Second)}
	if diff := cmp.Diff([]bool{false, true}, got); diff != "" {
		t.Errorf("idle connections closed: -want, +got:\n%s", diff)
	}
}

// TestHTTP2ClientThatStopsReading: a client that asks for a large answer
// and stops reading blocks the server's writes to its connection; the
// connection is closed once nothing could be written for WriteTimeout, as
// an HTTP/1.1 connection is closed by its write deadline, instead of
// being held, with its place under the caps, for as long as the client
// likes.
func TestHTTP2ClientThatStopsReading(t *testing.T) {
	tlsCfg, pool := tlsServing(t)
	cfg := Config{TLS: tlsCfg, WriteTimeout: 300 * time.Millisecond}.WithDefaults()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	l := newListener(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// More than the sockets of both ends buffer.
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}), cfg)
	closed := make(chan struct{})
	track := l.srv.ConnState
	l.srv.ConnState = func(c net.Conn, s http.ConnState) {
		track(c, s)
		if s == http.StateClosed {
			close(closed)
		}
	}
	go func() { _ = l.srv.Serve(l.ln) }()
	t.Cleanup(func() { _ = l.srv.Close() })

	c, err := hostile.Dialer{Proto: hostile.HTTP2, Pool: pool}.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Stall()
	if _, err := c.Send(http.MethodGet, "/", nil, "", true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		// A liveness bound only, far past the write timeout.
		t.Fatal("the connection of a client that stopped reading was still open after 20 s")
	}
}

// TestMaxConnAge: once a connection is older than MaxConnAge, the answer
// to its next request closes it (HTTP/1.1) or ends it with GOAWAY
// (HTTP/2), and the client sends its next request on a new connection,
// which kube-proxy may take to another replica; nothing is lost.
func TestMaxConnAge(t *testing.T) {
	tlsCfg, pool := tlsServing(t)
	const age = 300 * time.Millisecond
	cases := map[string]struct {
		reason string
		tls    *tls.Config
	}{
		"HTTP1": {reason: "Over HTTP/1.1 the answer says Connection: close."},
		"HTTP2": {reason: "Over HTTP/2 the answer comes with a GOAWAY.", tls: tlsCfg},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr, _ := serve(t, okHandler, Config{TLS: tc.tls, MaxConnAge: age})
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			url := "http://" + addr + "/"
			if tc.tls != nil {
				url = "https://" + addr + "/"
			}
			type call struct {
				Code   int
				Proto  string
				Reused bool
			}
			do := func() call {
				t.Helper()
				var reused bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s\n%v", tc.reason, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return call{Code: resp.StatusCode, Proto: resp.Proto, Reused: reused}
			}
			proto := "HTTP/1.1"
			if tc.tls != nil {
				proto = "HTTP/2.0"
			}
			before := []call{do()}
			// The connection was opened before its first answer came.
			opened := time.Now()
			before = append(before, do())
			if diff := cmp.Diff([]call{{200, proto, false}, {200, proto, true}}, before); diff != "" {
				t.Errorf("%s\ncalls within the age: -want, +got:\n%s", tc.reason, diff)
			}
			testsync.WaitFor(t, "the connection to outlive its maximum age", func() bool { return time.Since(opened) > age })
			// The first answer past the age retires the connection (over
			// HTTP/2 a call the client sent before it read the GOAWAY
			// may still be answered on it), and a later call opens a new
			// one; none fails.
			var after []call
			for len(after) < 3 && (len(after) == 0 || after[len(after)-1].Reused) {
				after = append(after, do())
			}
			if last := after[len(after)-1]; last != (call{200, proto, false}) {
				t.Errorf("%s\ncalls past the age: %+v; want one on a new connection within three", tc.reason, after)
			}
			if tc.tls == nil && len(after) != 2 {
				t.Errorf("%s\ncalls past the age: %+v; want the second on a new connection", tc.reason, after)
			}
		})
	}
}
