// Package hostile is the raw client of the hostile-client tests. It sends
// what an attacker sends, and what net/http's client never would (half a
// body and then nothing, a request reset as soon as it is sent, more
// streams than the server allows), over HTTP/1.1 or HTTP/2 with one API,
// so that each such test is one table over both protocols.
//
// HTTP/2 frames are written and read with golang.org/x/net/http2's Framer
// and HPACK coder: the standard library serves and speaks HTTP/2 but
// exports neither.
package hostile

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Proto is a protocol a test speaks.
type Proto int

// The protocols.
const (
	HTTP1 Proto = iota + 1
	HTTP2
)

// Protos are both protocols, for a table over them.
var Protos = []Proto{HTTP1, HTTP2}

func (p Proto) String() string {
	if p == HTTP2 {
		return "HTTP2"
	}
	return "HTTP1"
}

// Dialer opens connections of one protocol.
type Dialer struct {
	Proto Proto
	// From is the loopback address to dial from, so that a test can be
	// several clients; empty lets the system choose.
	From string
	// Pool, when set, makes the connection TLS, trusting Pool and naming
	// 127.0.0.1. HTTP/2 is only spoken over TLS.
	Pool *x509.CertPool
}

// Dial opens a connection to addr.
func (d Dialer) Dial(addr string) (*Conn, error) {
	nd := net.Dialer{Timeout: 5 * time.Second}
	if d.From != "" {
		nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(d.From)}
	}
	if d.Proto == HTTP2 && d.Pool == nil {
		return nil, errors.New("HTTP/2 needs TLS: set Pool")
	}
	var raw net.Conn
	var err error
	if d.Pool == nil {
		raw, err = nd.Dial("tcp", addr)
	} else {
		protos := []string{"http/1.1"}
		if d.Proto == HTTP2 {
			protos = []string{"h2"}
		}
		var tc *tls.Conn
		tc, err = tls.DialWithDialer(&nd, "tcp", addr, &tls.Config{RootCAs: d.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12, NextProtos: protos})
		if err == nil && d.Proto == HTTP2 && tc.ConnectionState().NegotiatedProtocol != "h2" {
			_ = tc.Close()
			return nil, fmt.Errorf("the server chose %q, not h2", tc.ConnectionState().NegotiatedProtocol)
		}
		raw = tc
	}
	if err != nil {
		return nil, err
	}
	c := &Conn{proto: d.Proto, raw: raw, addr: addr, br: bufio.NewReader(raw)}
	if d.Proto == HTTP2 {
		if err := c.startHTTP2(); err != nil {
			_ = raw.Close()
			return nil, err
		}
	}
	return c, nil
}

// Conn is one connection. Over HTTP/1.1 it carries one request.
type Conn struct {
	proto Proto
	raw   net.Conn
	addr  string
	br    *bufio.Reader

	// HTTP/1.1: the one request sent.
	sent bool

	// HTTP/2.
	wmu    sync.Mutex
	fr     *http2.Framer
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	nextID uint32

	mu      sync.Mutex
	changed *sync.Cond
	streams map[uint32]*Stream
	// sendConn is the connection's send window; the streams have theirs.
	sendConn     int64
	initialSend  int64
	maxStreams   uint32
	settingsSeen bool
	// goAway is the code of the server's GOAWAY, once it has sent one.
	goAway  *http2.ErrCode
	readErr error
	// stalled stops the reading of frames (Stall).
	stalled bool
}

// Raw is the connection underneath, for bytes this package does not
// frame (HTTP/1.1 headers that never end).
func (c *Conn) Raw() net.Conn { return c.raw }

// Close closes the connection.
func (c *Conn) Close() error { return c.raw.Close() }

// Stream is one request and its answer: over HTTP/2 a stream, over
// HTTP/1.1 the connection's one request.
type Stream struct {
	c  *Conn
	id uint32

	// Guarded by c.mu.
	status     int
	informed   []int
	headers    map[string]string
	body       bytes.Buffer
	ended      bool
	reset      *http2.ErrCode
	sendWindow int64
}

// Send starts a request: method and path with header (Content-Length
// among them, when the test announces one), then prefix of its body; end
// ends the body after prefix. Over HTTP/1.1 a connection sends one
// request.
func (c *Conn) Send(method, path string, header map[string]string, prefix string, end bool) (*Stream, error) {
	if c.proto == HTTP1 {
		if c.sent {
			return nil, errors.New("an HTTP/1.1 connection here carries one request")
		}
		c.sent = true
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, c.addr)
		for _, k := range slices.Sorted(maps.Keys(header)) {
			fmt.Fprintf(&b, "%s: %s\r\n", k, header[k])
		}
		b.WriteString("\r\n")
		b.WriteString(prefix)
		if _, err := io.WriteString(c.raw, b.String()); err != nil {
			return nil, err
		}
		return &Stream{c: c}, nil
	}
	c.wmu.Lock()
	id := c.nextID
	c.nextID += 2
	c.encBuf.Reset()
	fields := [][2]string{{":method", method}, {":scheme", "https"}, {":authority", c.addr}, {":path", path}}
	for _, k := range slices.Sorted(maps.Keys(header)) {
		fields = append(fields, [2]string{strings.ToLower(k), header[k]})
	}
	for _, f := range fields {
		if err := c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			c.wmu.Unlock()
			return nil, err
		}
	}
	s := &Stream{c: c, id: id}
	c.mu.Lock()
	s.sendWindow = c.initialSend
	c.streams[id] = s
	c.mu.Unlock()
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.encBuf.Bytes(), EndHeaders: true, EndStream: end && prefix == ""})
	c.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		// A stream the server reset at once (over its stream cap) is
		// still returned: that is an answer the test asks about.
		if err := s.write(prefix, end); err != nil && !errors.Is(err, errReset) {
			return nil, err
		}
	}
	return s, nil
}

// errReset is the error of a write to a stream the server has reset.
var errReset = errors.New("stream reset by the server")

// Write sends more of the body.
func (s *Stream) Write(p string) error {
	if s.c.proto == HTTP1 {
		_, err := io.WriteString(s.c.raw, p)
		return err
	}
	return s.write(p, false)
}

// write sends p in DATA frames within the flow-control windows, waiting
// for the server to open them.
func (s *Stream) write(p string, end bool) error {
	c := s.c
	for first := true; first || p != ""; first = false {
		c.mu.Lock()
		for c.readErr == nil && s.reset == nil && p != "" && (c.sendConn <= 0 || s.sendWindow <= 0) {
			c.changed.Wait()
		}
		if err := c.readErr; err != nil {
			c.mu.Unlock()
			return err
		}
		if s.reset != nil {
			c.mu.Unlock()
			return fmt.Errorf("stream %d: %w (%v)", s.id, errReset, *s.reset)
		}
		n := min(int64(len(p)), c.sendConn, s.sendWindow, 16<<10)
		c.sendConn -= n
		s.sendWindow -= n
		c.mu.Unlock()
		c.wmu.Lock()
		err := c.fr.WriteData(s.id, end && int(n) == len(p), []byte(p[:n]))
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Reset resets the stream (RST_STREAM, CANCEL); over HTTP/1.1 it closes
// the connection.
func (s *Stream) Reset() error {
	if s.c.proto == HTTP1 {
		return s.c.raw.Close()
	}
	s.c.wmu.Lock()
	defer s.c.wmu.Unlock()
	return s.c.fr.WriteRSTStream(s.id, http2.ErrCodeCancel)
}

// Status waits up to bound for the answer's status code (the final one,
// not a 100 Continue).
func (s *Stream) Status(bound time.Duration) (int, error) {
	if s.c.proto == HTTP1 {
		_ = s.c.raw.SetReadDeadline(time.Now().Add(bound))
		for {
			line, err := s.c.br.ReadString('\n')
			if err != nil {
				return 0, err
			}
			fields := strings.Fields(line)
			if len(fields) < 2 {
				return 0, fmt.Errorf("not a status line: %q", line)
			}
			code, err := strconv.Atoi(fields[1])
			if err != nil {
				return 0, fmt.Errorf("not a status line: %q", line)
			}
			// Skip the headers (and, for a 1xx, go on to the next answer).
			for {
				h, err := s.c.br.ReadString('\n')
				if err != nil {
					return 0, err
				}
				if h == "\r\n" {
					break
				}
			}
			if code >= 200 {
				return code, nil
			}
			s.informed = append(s.informed, code)
		}
	}
	var code int
	err := s.c.wait(bound, func() error {
		switch {
		case s.status != 0:
			code = s.status
			return nil
		case s.reset != nil:
			return fmt.Errorf("stream %d reset (%v) before an answer", s.id, *s.reset)
		case s.c.readErr != nil:
			return fmt.Errorf("connection lost before an answer: %w", s.c.readErr)
		}
		return errWait
	})
	return code, err
}

// Informed are the 1xx answers seen before the final one.
func (s *Stream) Informed() []int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return slices.Clone(s.informed)
}

// Ended reports whether, within bound, the server shows that it wants no
// more of the request's body: over HTTP/1.1 it closes the connection
// (after whatever it has sent), over HTTP/2 it ends the stream (a reset,
// or an answer with END_STREAM once the client's side has ended too).
func (s *Stream) Ended(bound time.Duration) bool {
	if s.c.proto == HTTP1 {
		return s.c.Closed(bound)
	}
	return s.c.wait(bound, func() error {
		if s.reset != nil || s.c.readErr != nil {
			return nil
		}
		return errWait
	}) == nil
}

// ResetCode is the code of the server's RST_STREAM for the stream, if it
// sent one.
func (s *Stream) ResetCode() (http2.ErrCode, bool) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.reset == nil {
		return 0, false
	}
	return *s.reset, true
}

// Closed reports whether the server closes the connection within bound:
// a read then ends in EOF or a reset rather than in the deadline. Over
// HTTP/2, what the server still sends before it closes is read and
// recorded as usual.
func (c *Conn) Closed(bound time.Duration) bool {
	if c.proto == HTTP1 {
		_ = c.raw.SetReadDeadline(time.Now().Add(bound))
		_, err := io.Copy(io.Discard, c.br)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	return c.wait(bound, func() error {
		if c.readErr != nil {
			return nil
		}
		return errWait
	}) == nil
}

// GoAway waits up to bound for the server's GOAWAY and returns its code.
func (c *Conn) GoAway(bound time.Duration) (http2.ErrCode, bool) {
	var code http2.ErrCode
	err := c.wait(bound, func() error {
		switch {
		case c.goAway != nil:
			code = *c.goAway
			return nil
		case c.readErr != nil:
			return c.readErr
		}
		return errWait
	})
	return code, err == nil
}

// MaxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS the server announced
// (waiting up to a second for its SETTINGS).
func (c *Conn) MaxStreams() (uint32, bool) {
	var n uint32
	err := c.wait(time.Second, func() error {
		if c.settingsSeen {
			n = c.maxStreams
			return nil
		}
		return errWait
	})
	return n, err == nil
}

var errWait = errors.New("not yet")

// wait waits up to bound for cond, called under c.mu, to return other
// than errWait.
func (c *Conn) wait(bound time.Duration, cond func() error) error {
	timer := time.AfterFunc(bound, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(bound)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if err := cond(); !errors.Is(err, errWait) {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("nothing within %v", bound)
		}
		c.changed.Wait()
	}
}

// startHTTP2 sends the client preface with a receive window large enough
// that the test never needs to read answers to keep the server writing,
// and starts reading frames.
func (c *Conn) startHTTP2() error {
	c.changed = sync.NewCond(&c.mu)
	c.streams = map[uint32]*Stream{}
	c.nextID = 1
	c.sendConn, c.initialSend = 65535, 65535
	c.fr = http2.NewFramer(c.raw, c.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.encBuf)
	if _, err := io.WriteString(c.raw, http2.ClientPreface); err != nil {
		return err
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}, http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		return err
	}
	go c.readFrames()
	return nil
}

func (c *Conn) readFrames() {
	for {
		c.mu.Lock()
		for c.stalled {
			c.changed.Wait()
		}
		c.mu.Unlock()
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.lost(err)
			return
		}
		c.mu.Lock()
		var reply func() error
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.settingsSeen = true
				if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
					c.maxStreams = v
				}
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					for _, s := range c.streams {
						s.sendWindow += int64(v) - c.initialSend
					}
					c.initialSend = int64(v)
				}
				reply = c.fr.WriteSettingsAck
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				reply = func() error { return c.fr.WritePing(true, data) }
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.sendConn += int64(f.Increment)
			} else if s := c.streams[f.StreamID]; s != nil {
				s.sendWindow += int64(f.Increment)
			}
		case *http2.MetaHeadersFrame:
			if s := c.streams[f.StreamID]; s != nil {
				code, _ := strconv.Atoi(f.PseudoValue("status"))
				if code >= 200 && s.status == 0 {
					s.status = code
					s.headers = map[string]string{}
					for _, h := range f.RegularFields() {
						s.headers[h.Name] = h.Value
					}
				} else if code > 0 && code < 200 {
					s.informed = append(s.informed, code)
				}
				if f.StreamEnded() {
					s.ended = true
				}
			}
		case *http2.DataFrame:
			if s := c.streams[f.StreamID]; s != nil {
				s.body.Write(f.Data())
				if f.StreamEnded() {
					s.ended = true
				}
			}
		case *http2.RSTStreamFrame:
			if s := c.streams[f.StreamID]; s != nil {
				code := f.ErrCode
				s.reset = &code
			}
		case *http2.GoAwayFrame:
			code := f.ErrCode
			c.goAway = &code
		}
		c.changed.Broadcast()
		c.mu.Unlock()
		if reply != nil {
			c.wmu.Lock()
			err := reply()
			c.wmu.Unlock()
			if err != nil {
				c.lost(err)
				return
			}
		}
	}
}

// Stall stops reading what the server sends (HTTP/2 only), as a client
// does that wants the server's writes to block: after the frame being
// read, nothing more is read from the connection.
func (c *Conn) Stall() {
	c.mu.Lock()
	c.stalled = true
	c.mu.Unlock()
}

// lost records that the connection failed with err.
func (c *Conn) lost(err error) {
	c.mu.Lock()
	c.readErr = err
	c.changed.Broadcast()
	c.mu.Unlock()
}

// Body is the answer's body received so far (HTTP/2 only).
func (s *Stream) Body() string {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.body.String()
}
