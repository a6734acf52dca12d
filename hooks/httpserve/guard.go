package httpserve

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// guard bounds how long every request body may take to arrive, and makes a
// refusal cost next to nothing once it is written.
//
// Go's server, when a handler answers without reading the whole body,
// reads and discards up to 256 KiB of it before it even writes the answer,
// and again when the request ends, so that the connection can be reused.
// A client that announces a body and trickles it then holds the connection
// for the whole read timeout, and a refusal (a 401 to a client with no
// token, a 404, a 413) costs as much as serving. So an answer written
// before the body was read asks for the connection to be closed (which
// also skips the discard), and once the handler is done the connection's
// read deadline is moved to now, so that nothing waits for those bytes.
// The connection is then closed the way Go's server closes one after a
// body over its limit: the write side first, so that the client reads the
// whole answer before the rest of its body meets a closed socket (which
// would reset the connection and lose the answer), and fully half a
// second later.
//
// Every body, refused or served, authenticated or not, must arrive within
// bodyTimeout of the end of the headers. The deadline is lifted once the
// body has been read to its end: after that a read deadline would only
// make the server's background read fail, which cancels the request's
// context while the handler works.
func guard(h http.Handler, bodyTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		body := &guardedBody{ReadCloser: r.Body, rc: rc}
		r.Body = body
		h.ServeHTTP(&guardedWriter{ResponseWriter: w, body: body}, r)
		if !body.read.Load() {
			_ = rc.SetReadDeadline(time.Now())
			closeAfterAnswer(w)
		}
	})
}

// closeAfterAnswer tells Go's server to close the connection after the
// answer as it does for a body over http.MaxBytesReader's limit: write
// side first, then all of it (see guard). A MaxBytesReader of no bytes
// over a reader with one byte to give reaches its limit at once, and
// tells w so, without reading anything from the connection.
func closeAfterAnswer(w http.ResponseWriter) {
	var b [1]byte
	_, _ = http.MaxBytesReader(w, oneByte{}, 0).Read(b[:])
}

// oneByte always has one more byte.
type oneByte struct{}

func (oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = 0
	return 1, nil
}

func (oneByte) Close() error { return nil }

// guardedBody notes when the body has been read to its end.
type guardedBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	read atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.read.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// guardedWriter closes the connection after an answer written before the
// body was read.
type guardedWriter struct {
	http.ResponseWriter
	body        *guardedBody
	wroteHeader bool
}

func (w *guardedWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if !w.body.read.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
