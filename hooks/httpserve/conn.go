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
// handshake, or a request Go's HTTP server answered itself because it
// could not be parsed. Kind and Reason are short stable words, fit for a
// metric label.
type Refusal struct {
	// Kind is "tls-handshake" or "request".
	Kind string
	// Reason says why, from a fixed set per kind (see handshakeReason and
	// serverErrors).
	Reason string
}

// Kinds of Refusal.
const (
	RefusedHandshake = "tls-handshake"
	RefusedRequest   = "request"
)

// connListener hands every accepted connection to the HTTP server as a
// serverConn: over TLS, when tlsCfg is set, with the handshake done here
// so that its failures are counted and logged at a bounded rate rather
// than one warning per attempt; and with the plain-text errors Go's server
// writes for requests it cannot parse rewritten in the error format.
type connListener struct {
	net.Listener
	tls     *tls.Config
	timeout time.Duration
	refused func(Refusal, error)
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &serverConn{Conn: c, l: l}
	if l.tls != nil {
		sc.tls = tls.Server(c, l.tls)
		sc.Conn = sc.tls
	}
	return sc, nil
}

// serverConn is one accepted connection.
type serverConn struct {
	net.Conn
	l   *connListener
	tls *tls.Conn

	handshake sync.Once
	hsErr     error
}

// Read does the TLS handshake first, under its own timeout.
func (c *serverConn) Read(p []byte) (int, error) {
	if c.tls != nil {
		c.handshake.Do(func() { c.hsErr = c.doHandshake() })
		if c.hsErr != nil {
			return 0, c.hsErr
		}
	}
	return c.Conn.Read(p)
}

func (c *serverConn) doHandshake() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.l.timeout)
	defer cancel()
	err := c.tls.HandshakeContext(ctx)
	if err == nil {
		return nil
	}
	reason := handshakeReason(err)
	if reason == "not-tls" {
		// Plain HTTP sent to the TLS port: say so in the error format,
		// unencrypted, the way Go's own TLS server does in plain text.
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil {
			_ = re.Conn.SetWriteDeadline(time.Now().Add(c.l.timeout))
			_, _ = re.Conn.Write(errorResponse(http.StatusBadRequest, "plain HTTP sent to a TLS port: use https"))
		}
	}
	c.l.refused(Refusal{Kind: RefusedHandshake, Reason: reason}, err)
	return err
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

// tlsForServing is cfg for connListener: HTTP/1.1 only. Every connection
// cap and refusal rule here counts connections, and one HTTP/2 connection
// carries any number of concurrent requests (and has attacks of its own,
// such as rapid reset). Metacontroller's hook client would take HTTP/2 if
// it were offered (its transport is a clone of Go's default one); over
// HTTP/1.1 it carries one request per connection at a time and keeps two
// idle, so it dials again when more of its workers call at once
// (docs/install.md, "Many workspaces").
func tlsForServing(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.NextProtos = []string{"http/1.1"}
	if get := cfg.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if c == nil || err != nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = []string{"http/1.1"}
			return c, nil
		}
	}
	return out
}
