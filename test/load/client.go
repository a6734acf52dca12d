package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The load driver speaks HTTP/1.1 itself rather than through net/http's
// client: on a two-core machine that client (a goroutine pair per
// connection, a Request and Response per call, header maps, a body
// reader) costs about as much CPU as the servers it measures, and
// whatever the driver burns is taken from the server and squeezes every
// ratio towards 1. This client does what wrk does: one connection per
// worker, each request serialised once, one write per request, the answer
// parsed in place out of a reused buffer and thrown away. It knows only
// the HTTP the servers it measures answer with: a status line, headers,
// and a body framed by Content-Length, chunked encoding or the end of the
// connection.

// target is a loopback server and the requests to send it, each already
// serialised to the bytes that go on the wire.
type target struct {
	addr string   // host:port
	wire [][]byte // wire[i] carries reqs[i] with X-Fixture: i
}

// newTarget serialises reqs for the server at base, which must be a
// loopback URL.
func newTarget(base string, reqs []request) (*target, error) {
	host, err := parseLoopback(base)
	if err != nil {
		return nil, err
	}
	t := &target{addr: host, wire: make([][]byte, len(reqs))}
	for i, r := range reqs {
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Fixture: %d\r\n\r\n",
			r.path, host, len(r.body), i)
		t.wire[i] = append([]byte(head), r.body...)
	}
	return t, nil
}

// conn is one worker's connection to a target. It dials lazily, keeps the
// connection while the server keeps it alive and redials after a server
// that closes (HTTP/1.0, Connection: close) or any error.
type conn struct {
	t        *target
	c        net.Conn
	br       *bufio.Reader // reset onto every new connection, never reallocated
	deadline time.Time     // the deadline set on c
	dials    int
}

func newConn(t *target) *conn {
	// Large enough for any status or header line the servers write; a
	// longer line is refused as malformed.
	return &conn{t: t, br: bufio.NewReaderSize(nil, 16<<10)}
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}

// do sends request n and reads the answer to its end. It returns the
// status code and the time from just before the write to the last byte of
// the body, which leaves out the dial. The deadline (zero for none) bounds
// the dial, the write and the read: a round that ends cuts the request in
// flight. After any error the connection is closed.
func (c *conn) do(n int, deadline time.Time) (code int, latency time.Duration, err error) {
	if c.c == nil {
		d := net.Dialer{Deadline: deadline}
		nc, err := d.Dial("tcp", c.t.addr)
		if err != nil {
			return 0, 0, err
		}
		c.c, c.deadline = nc, time.Time{}
		c.br.Reset(nc)
		c.dials++
	}
	if !deadline.Equal(c.deadline) {
		if err := c.c.SetDeadline(deadline); err != nil {
			c.close()
			return 0, 0, err
		}
		c.deadline = deadline
	}
	start := time.Now()
	code, keep, err := c.roundTrip(c.t.wire[n])
	latency = time.Since(start)
	if err != nil || !keep {
		c.close()
	}
	return code, latency, err
}

// roundTrip writes one request and reads its response; keep says whether
// the server left the connection open for the next one.
func (c *conn) roundTrip(req []byte) (code int, keep bool, err error) {
	if _, err := c.c.Write(req); err != nil {
		return 0, false, err
	}
	line, err := c.line()
	if err != nil {
		return 0, false, fmt.Errorf("cannot read status line: %w", err)
	}
	// HTTP/1.x SP 3DIGIT SP reason: only the version and code matter.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	keep = line[7] == '1'
	code, ok := digits(line[9:12], 10)
	if !ok || code < 100 {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	if code < 200 {
		// Nothing sends Expect or upgrades, so an interim answer is a
		// server this client does not understand.
		return 0, false, fmt.Errorf("unexpected informational status %d", code)
	}

	length, chunked := -1, false
	for {
		line, err := c.line()
		if err != nil {
			return 0, false, fmt.Errorf("cannot read headers: %w", err)
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, ok = digits(value, 10); !ok {
				return 0, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return 0, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			if hasToken(value, "close") {
				keep = false
			}
		}
	}

	switch {
	case code == 204 || code == 304:
	case chunked:
		err = c.discardChunked()
	case length >= 0:
		_, err = c.br.Discard(length)
	default:
		// No framing: the body ends when the server closes.
		_, err = c.br.WriteTo(io.Discard)
		keep = false
	}
	if err != nil {
		return 0, false, fmt.Errorf("cannot read body: %w", err)
	}
	return code, keep, nil
}

// discardChunked reads a chunked body and its trailer.
func (c *conn) discardChunked() error {
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, ok := digits(bytes.TrimSpace(size), 16)
		if !ok {
			return fmt.Errorf("malformed chunk size %q", line)
		}
		if n == 0 {
			break
		}
		if _, err := c.br.Discard(n); err != nil {
			return err
		}
		end, err := c.line()
		if err != nil {
			return err
		}
		if len(end) != 0 {
			return fmt.Errorf("chunk of %d bytes not followed by CRLF", n)
		}
	}
	for { // trailer fields, up to the empty line
		line, err := c.line()
		if err != nil || len(line) == 0 {
			return err
		}
	}
}

// line returns the next CRLF-terminated line without its CRLF, as a view
// into the reader's buffer valid until the next read.
func (c *conn) line() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return nil, fmt.Errorf("line %q does not end in CRLF", line)
	}
	return line[:len(line)-1], nil
}

// digits parses a non-negative number in base 10 or 16 without
// allocating; it refuses empty input, any other byte and overflow.
func digits(b []byte, base int) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, ch := range b {
		var d int
		switch {
		case '0' <= ch && ch <= '9':
			d = int(ch - '0')
		case base == 16 && 'a' <= ch|0x20 && ch|0x20 <= 'f':
			d = int(ch|0x20-'a') + 10
		default:
			return 0, false
		}
		n = n*base + d
	}
	return n, true
}

// hasToken reports whether the comma-separated header value lists token,
// ignoring case.
func hasToken(value []byte, token string) bool {
	for part := range bytes.SplitSeq(value, []byte(",")) {
		if bytes.EqualFold(bytes.TrimSpace(part), []byte(token)) {
			return true
		}
	}
	return false
}
