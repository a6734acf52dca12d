package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

// DefaultBodyTimeout bounds reading one request body. Metacontroller sends
// at most a few MiB from inside the cluster, which takes well under a
// second; a client still sending after 10 s is trickling bytes to hold the
// connection.
const DefaultBodyTimeout = 10 * time.Second

// errBudget is the read error of a body that would take the in-flight
// bytes over their budget.
var errBudget = errors.New("in-flight request bytes over budget")

// readBody reads the whole body before the hook gets a slot, so that a slow
// client costs a connection and the bytes it sent, never a hook slot. A
// Content-Length over maxBody is refused before anything is read (and so
// before Go's server sends "100 Continue"); reading stops at timeout and
// when the bytes held by every request being served would exceed budget.
// The hook's handler then gets the bytes already read (see bodyBytes).
func readBody(maxBody int64, timeout time.Duration, budget *byteBudget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpserve.ContentLengthOver(r, maxBody) {
			refuseBody(w, &http.MaxBytesError{Limit: maxBody})
			return
		}
		deadline := httpserve.BodyDeadline(w, timeout)
		raw, held, err := readAll(http.MaxBytesReader(w, r.Body, maxBody), budget)
		defer budget.release(held)
		if err != nil {
			refuseBody(w, err)
			return
		}
		if deadline {
			// Past this point a read deadline would only make the
			// server's background read fail, which cancels the request's
			// context while the hook works.
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		}
		r.Body = &bufferedBody{raw: raw}
		next.ServeHTTP(w, r)
	})
}

// refuseBody answers a request whose body could not be read, by why.
func refuseBody(w http.ResponseWriter, err error) {
	// The rest of the body is not wanted: without this, Go's server would
	// try to read and discard it before answering, waiting on the very
	// client that failed to send it.
	w.Header().Set("Connection", "close")
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, tooLarge(tooBig.Limit))
	case errors.Is(err, errBudget):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many request bytes in flight")
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, "request body not received in time")
	default:
		// The client went away or sent a broken chunked body; nobody is
		// likely to read the answer, but it must still be a stable line.
		writeError(w, http.StatusBadRequest, "cannot read request body")
	}
}

func tooLarge(limit int64) string {
	return fmt.Sprintf("request body exceeds %d bytes", limit)
}

// bufferedBody is a body already read into memory; Handler uses the bytes
// instead of copying them again.
type bufferedBody struct {
	raw []byte
	off int
}

func (b *bufferedBody) Read(p []byte) (int, error) {
	if b.off >= len(b.raw) {
		return 0, io.EOF
	}
	n := copy(p, b.raw[b.off:])
	b.off += n
	return n, nil
}

func (b *bufferedBody) Close() error { return nil }

// bodyBytes returns r's body as readBody left it, if it did.
func bodyBytes(r *http.Request) ([]byte, bool) {
	if b, ok := r.Body.(*bufferedBody); ok && b.off == 0 {
		return b.raw, true
	}
	return nil, false
}

// readAll reads r to the end like io.ReadAll, but takes every byte of
// buffer it allocates from budget first, so the budget counts the memory
// really held. It returns the bytes taken even on error; the caller gives
// them back when the request ends.
func readAll(r io.Reader, budget *byteBudget) (buf []byte, held int64, err error) {
	const first = 4 << 10
	for {
		if len(buf) == cap(buf) {
			grow := int64(max(cap(buf), first))
			if !budget.take(grow) {
				return nil, held, errBudget
			}
			held += grow
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// byteBudget counts the request-body bytes held by requests being served.
// A nil budget, or one with no limit, takes everything.
type byteBudget struct {
	limit   int64
	metrics *Metrics

	mu   sync.Mutex
	used int64
}

func newByteBudget(limit int64, m *Metrics) *byteBudget {
	return &byteBudget{limit: limit, metrics: m}
}

func (b *byteBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && b.used+n > b.limit {
		return false
	}
	b.used += n
	b.observe()
	return true
}

func (b *byteBudget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.observe()
}

func (b *byteBudget) observe() {
	if b.metrics != nil {
		b.metrics.inFlightBytes.Set(float64(b.used))
	}
}
