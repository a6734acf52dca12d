package httpserve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
)

// captureConn records what is written to it.
type captureConn struct {
	net.Conn
	out bytes.Buffer
}

func (c *captureConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// FuzzServerErrors writes arbitrary bytes through the connection wrapper
// that rewrites Go's own error answers: whatever is written comes out
// unchanged, or, when it was one of those answers, as a whole HTTP answer
// with a one-line JSON error of the same status that closes the
// connection. The seeds are the answers Go's server writes itself and an
// answer a handler writes.
//
//	go test ./internal/httpserve -run '^$' -fuzz FuzzServerErrors -fuzztime 60s
func FuzzServerErrors(f *testing.F) {
	const headers = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	for _, s := range []string{
		"HTTP/1.1 431 Request Header Fields Too Large" + headers + "431 Request Header Fields Too Large",
		"HTTP/1.1 400 Bad Request" + headers + "400 Bad Request",
		"HTTP/1.1 400 Bad Request: missing required Host header" + headers + "400 Bad Request: missing required Host header",
		"HTTP/1.1 501 Not Implemented" + headers + "Unsupported transfer encoding",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nContent-Length: 3\r\n\r\nok\n",
		"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"error\":\"x\"}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		capture := &captureConn{}
		c := &serverConn{Conn: capture, l: &connListener{refused: func(Refusal, error) {}}}
		n, err := c.Write(p)
		if err != nil || n != len(p) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
		out := capture.out.Bytes()
		if bytes.Equal(out, p) {
			if serverError.Match(p) {
				t.Fatalf("one of Go's error answers went out unchanged: %q", p)
			}
			return
		}
		if !serverError.Match(p) {
			t.Fatalf("an answer that is not Go's own was rewritten:\n%q\nto\n%q", p, out)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("the rewritten answer does not parse: %v\n%q", err, out)
		}
		var body ErrorBody
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Error == "" || strings.ContainsAny(body.Error, "\r\n") {
			t.Fatalf("the rewritten body is not one error line: %v %q", err, out)
		}
		if resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
			t.Fatalf("the rewritten answer is not JSON closing the connection: %q", out)
		}
		if got := strings.Fields(string(p))[1]; got != resp.Status[:3] {
			t.Fatalf("status %s rewritten as %s", got, resp.Status)
		}
	})
}
