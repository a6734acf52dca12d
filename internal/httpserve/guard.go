package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// guard is the first handler of every listener. It bounds how long every
// request body may take to arrive, makes a refusal cost next to nothing
// once it is written, counts HTTP/2 requests against the connection caps
// (see ConnLimits), and retires connections older than the maximum age.
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
// second later. An error answer to a request without a body closes the
// connection too: every refusal costs the client its connection.
//
// Over HTTP/2 the same rules hold per stream. Go's server resets a stream
// whose handler answered before reading its body (RST_STREAM, NO_ERROR)
// and drops, without buffering, what the client still sends on it; the
// deadline ends a stream whose body is late, never the connection; and
// "Connection: close" makes it send GOAWAY, so that a client whose request
// was refused opens no new stream on that connection: every refusal
// still costs it a connection, however many streams it opens.
//
// Every body, refused or served, authenticated or not, must arrive within
// bodyTimeout of the end of the headers. The deadline is lifted once the
// body has been read to its end: after that a read deadline would only
// make the server's background read fail, which cancels the request's
// context while the handler works.
func guard(h http.Handler, g guardConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _ := r.Context().Value(connInfoKey{}).(*connInfo)
		if r.ProtoMajor == 2 && conn != nil {
			// The connection's own slot under the caps covers one
			// request; each more at once takes a slot of its own.
			if conn.streams.Add(1) > 1 {
				client := clientAddr(r.RemoteAddr)
				if over := g.caps.takeStream(client); over != "" {
					conn.streams.Add(-1)
					g.refused(Refusal{Kind: RefusedHTTP2, Reason: over}, errors.New("too many requests in progress"))
					w.Header().Set("Connection", "close")
					w.Header().Set("Retry-After", "1")
					WriteError(w, http.StatusTooManyRequests, "too many requests in progress")
					return
				}
				if g.caps != nil {
					defer g.caps.release(client)
				}
			}
			defer conn.streams.Add(-1)
		}
		if g.maxAge > 0 && conn != nil && time.Since(conn.opened) >= g.maxAge {
			// The connection has carried requests long enough: the
			// client's next request dials again, and so may reach
			// another replica (see Config.MaxConnAge).
			w.Header().Set("Connection", "close")
		}
		body := &guardedBody{}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			body.none = true
			body.read.Store(true)
			h.ServeHTTP(&guardedWriter{ResponseWriter: w, body: body}, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(g.bodyTimeout))
		body.ReadCloser, body.rc = r.Body, rc
		r.Body = body
		h.ServeHTTP(&guardedWriter{ResponseWriter: w, body: body}, r)
		if !body.read.Load() {
			_ = rc.SetReadDeadline(time.Now())
			closeAfterAnswer(w)
		}
	})
}

// guardConfig is what guard needs of its listener.
type guardConfig struct {
	bodyTimeout time.Duration
	// maxAge is Config.MaxConnAge; zero retires no connection.
	maxAge time.Duration
	// caps counts HTTP/2 requests; nil counts none.
	caps    *caps
	refused func(Refusal, error)
}

// connInfo is what guard knows of a connection: every request of it
// finds it in its context (connContext).
type connInfo struct {
	// opened is when the connection was accepted.
	opened time.Time
	// streams counts its requests in progress (HTTP/2).
	streams atomic.Int32
}

// connInfoKey is the context key of a *connInfo.
type connInfoKey struct{}

// connContext is http.Server.ConnContext.
func connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connInfoKey{}, &connInfo{opened: time.Now()})
}

// closeAfterAnswer tells Go's server to close the connection after the
// answer as it does for a body over http.MaxBytesReader's limit: write
// side first, then all of it (see guard). A MaxBytesReader of no bytes
// over a reader with one byte to give reaches its limit at once, and
// tells w so, without reading anything from the connection. Over HTTP/2
// it does nothing: the stream is reset instead.
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
	// none is set for a request without a body.
	none bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.read.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// guardedWriter closes the connection after an answer written before the
// body was read, and after an error answer to a request without one.
type guardedWriter struct {
	http.ResponseWriter
	body        *guardedBody
	wroteHeader bool
}

func (w *guardedWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if !w.body.read.Load() || (w.body.none && code >= http.StatusBadRequest) {
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

// Flush lets a handler that streams its answer flush it through guard.
func (w *guardedWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}
