package httpserve

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Refusal is something a listener refused below any handler: a failed TLS
// handshake, a request Go's HTTP server answered itself because it could
// not be parsed, or an HTTP/2 stream or connection ended by the caps or by
// an error of the protocol. Kind and Reason are short stable words, fit
// for a metric label.
type Refusal struct {
	// Kind is "tls-handshake", "request" or "http2".
	Kind string
	// Reason says why, from a fixed set per kind (see handshakeReason,
	// serverErrors, and for HTTP/2 HTTP2StreamsPerClient and the reasons
	// beside it).
	Reason string
}

// Kinds of Refusal.
const (
	RefusedHandshake = "tls-handshake"
	RefusedRequest   = "request"
	RefusedHTTP2     = "http2"
)

// connListener hands every accepted connection to the HTTP server: over
// TLS, when tls is set, with the handshake done here first, so that its
// failures are counted and logged at a bounded rate rather than one
// warning per attempt, and so that the protocol the client chose by ALPN
// is known before the server sees the connection. An HTTP/2 connection
// goes to the server as the *tls.Conn itself, which is how net/http knows
// to serve HTTP/2 on it; an HTTP/1.1 one, and every plain one, as a
// serverConn, which rewrites the plain-text errors Go's server writes for
// requests it cannot parse in the error format.
//
// The handshakes run on goroutines of their own, each under the header
// timeout, so that a client that stalls its handshake holds one
// connection (under the caps below, which count it) and never Accept.
type connListener struct {
	net.Listener
	tls     *tls.Config
	timeout time.Duration
	refused func(Refusal, error)

	// Over TLS: a goroutine accepts, one per connection does its
	// handshake, and Accept hands over the connections that are ready.
	mu        sync.Mutex
	accepting bool
	ready     chan net.Conn
	failed    chan error
	// ctx ends when the listener closes, and with it every handshake
	// still under way.
	ctx  context.Context
	stop context.CancelFunc
}

func newConnListener(ln net.Listener, tlsCfg *tls.Config, timeout time.Duration, refused func(Refusal, error)) *connListener {
	ctx, stop := context.WithCancel(context.Background())
	return &connListener{
		Listener: ln, tls: tlsCfg, timeout: timeout, refused: refused,
		ready: make(chan net.Conn), failed: make(chan error, 1), ctx: ctx, stop: stop,
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	if l.tls == nil {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		return &serverConn{Conn: c, l: l}, nil
	}
	l.mu.Lock()
	if !l.accepting {
		l.accepting = true
		go l.acceptLoop()
	}
	l.mu.Unlock()
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.failed:
		return nil, err
	}
}

// acceptLoop accepts connections and starts their handshakes until the
// listener fails; the error goes to Accept, and the next Accept starts
// the loop again, after whatever pause the HTTP server takes between
// failed Accepts (it backs off from 5 ms to 1 s).
func (l *connListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.mu.Lock()
			l.accepting = false
			l.mu.Unlock()
			l.failed <- err
			return
		}
		go l.handshake(c)
	}
}

// handshake does c's TLS handshake under the header timeout and hands the
// connection to Accept, or closes it when the handshake fails or the
// listener has closed.
func (l *connListener) handshake(c net.Conn) {
	tc := tls.Server(c, l.tls)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if l.ctx.Err() == nil {
			l.handshakeFailed(err)
		}
		_ = tc.Close()
		return
	}
	var out net.Conn = tc
	if tc.ConnectionState().NegotiatedProtocol != http2Proto {
		out = &serverConn{Conn: tc, l: l, tls: tc}
	}
	select {
	case l.ready <- out:
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// Close closes the listener and ends the handshakes still under way.
func (l *connListener) Close() error {
	l.stop()
	return l.Listener.Close()
}

// serverConn is one accepted connection that serves HTTP/1.1, plain or
// over TLS (tls is then the connection underneath, its handshake done).
type serverConn struct {
	net.Conn
	l   *connListener
	tls *tls.Conn
}

// handshakeFailed reports a failed handshake by reason; plain HTTP sent to
// the TLS port gets an answer saying so.
func (l *connListener) handshakeFailed(err error) {
	reason := handshakeReason(err)
	if reason == "not-tls" {
		// Plain HTTP sent to the TLS port: say so in the error format,
		// unencrypted, the way Go's own TLS server does in plain text.
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil {
			_ = re.Conn.SetWriteDeadline(time.Now().Add(l.timeout))
			_, _ = re.Conn.Write(errorResponse(http.StatusBadRequest, "plain HTTP sent to a TLS port: use https"))
		}
	}
	l.refused(Refusal{Kind: RefusedHandshake, Reason: reason}, err)
}

// handshakeReason sorts a failed handshake into a small fixed set, for the
// metric label; the error itself goes to the (rate-limited) log.
func handshakeReason(err error) string {
	var re tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	msg := err.Error()
	switch {
	case errors.As(err, &re):
		return "not-tls"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), strings.Contains(msg, "connection reset"):
		return "closed"
	case errors.As(err, &verify), strings.Contains(msg, "client didn't provide a certificate"):
		// Under mTLS: no client certificate, or one the CA did not sign.
		return "client-certificate"
	case errors.As(err, &alert), strings.Contains(msg, "remote error"):
		// The client refused the handshake, most often because it does
		// not trust the serving certificate (a CA bundle out of date).
		return "rejected-by-client"
	case strings.Contains(msg, "certificate"):
		// No serving certificate to offer: the pair cannot be read.
		return "server-certificate"
	}
	return "other"
}

// serverError matches the only answers Go's server writes itself, for
// requests it cannot parse: each in one Write, straight to the
// connection, a status line followed at once by these two headers, then
// a short text. Every answer a handler writes carries other headers
// (Date at least) and is never matched.
var serverError = regexp.MustCompile(`\AHTTP/1\.1 ([45]\d\d) ([^\r\n]*)\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n[^\r\n]*\z`)

// serverErrors turns Go's answers into stable error lines and reasons.
// Go's own texts here are fixed strings, never quoting the request.
func serverErrors(code int, text string) (msg, reason string) {
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "request headers too large", "headers-too-large"
	case http.StatusNotImplemented:
		return "unsupported transfer encoding", "transfer-encoding"
	}
	if _, detail, ok := strings.Cut(text, ": "); ok {
		return "bad request: " + detail, "malformed"
	}
	return "bad request: the request could not be parsed", "malformed"
}

// CloseWrite shuts the connection's write side (after a TLS close_notify),
// which Go's server does before closing a connection whose client may
// still be sending (see guard).
func (c *serverConn) CloseWrite() error {
	if c.tls != nil {
		return c.tls.CloseWrite()
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Write rewrites Go's own error answers in the error format.
func (c *serverConn) Write(p []byte) (int, error) {
	if m := serverError.FindSubmatch(p); m != nil {
		code, _ := strconv.Atoi(string(m[1]))
		msg, reason := serverErrors(code, string(m[2]))
		c.l.refused(Refusal{Kind: RefusedRequest, Reason: reason}, errors.New(msg))
		if _, err := c.Conn.Write(errorResponse(code, msg)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// errorResponse is a whole HTTP/1.1 answer with an ErrorBody that closes
// the connection.
func errorResponse(code int, msg string) []byte {
	raw, err := json.Marshal(ErrorBody{Error: strings.Join(strings.Fields(msg), " ")})
	if err != nil {
		raw = []byte(`{"error":"bad request"}`)
	}
	body := string(raw) + "\n"
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	return b.Bytes()
}

// ALPN protocol names.
const (
	http2Proto = "h2"
	http1Proto = "http/1.1"
)

// serveProtos is what the TLS listener offers by ALPN, HTTP/2 first. A
// client that keeps one HTTP/2 connection (Metacontroller's hook client,
// a clone of Go's default transport) needs no handshake after the first;
// over HTTP/1.1 it carries one request per connection at a time, keeps
// two idle, and dials again whenever more of its workers call at once,
// about once per two calls. Every cap and refusal rule of this package
// holds per HTTP/2 stream as it does per HTTP/1.1 connection (see
// ConnLimits and guard).
var serveProtos = []string{http2Proto, http1Proto}

// tlsForServing is cfg for connListener, offering serveProtos by ALPN,
// also from the config GetConfigForClient returns.
func tlsForServing(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.NextProtos = serveProtos
	if get := cfg.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if c == nil || err != nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = serveProtos
			return c, nil
		}
	}
	return out
}
