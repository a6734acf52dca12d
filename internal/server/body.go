package server

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"os"
	"sync"

	"github.com/formspec/formspec-hooks/internal/httpserve"
)

// DecodedCost is what a request holds, per byte of its body, while its
// hook decodes and works on it, besides the body itself: the copy the
// decoder keeps, the raw objects, the typed values decoded from them, the
// children built and the answer encoded. The in-flight budget charges it
// once the body is read and before the hook decodes anything, so that the
// budget bounds what requests cost decoded, not only their bytes.
// TestDecodedCost measures the worst shapes a request can take within the
// limits (a Workspace whose namespace holds as many ResourceClaims as a
// request may carry, small or padded to the body limit; a ResourceClaim
// with as many labelled Secrets as a request may carry) and holds what
// each allocates under the body's buffer and this factor: the largest
// measured was 7.5 bytes per body byte, buffer included (docs/security.md).
const DecodedCost = 8

// errBudget is the read error of a body that would take the in-flight
// bytes over their budget.
var errBudget = errors.New("in-flight request bytes over budget")

// readBody reads the whole body before the hook gets a slot, so that a slow
// client costs a connection and the bytes it sent, never a hook slot. A
// Content-Length over maxBody is refused before anything is read (and so
// before Go's server sends "100 Continue"); reading stops at the body
// timeout (the listener's, see httpserve.Config.BodyTimeout) and when the
// bytes held by every request being served would exceed budget.
// The hook's handler then gets the bytes already read (see bodyBytes); they
// go back to the buffer pool, wiped, once the handler has returned.
func readBody(maxBody int64, budget *byteBudget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpserve.ContentLengthOver(r, maxBody) {
			refuseBody(w, &http.MaxBytesError{Limit: maxBody})
			return
		}
		raw, held, err := readAll(http.MaxBytesReader(w, r.Body, maxBody), r.ContentLength, budget)
		defer budget.release(held)
		if err != nil {
			refuseBody(w, err)
			return
		}
		// What decoding the body and working on it will hold, taken before
		// the hook decodes anything.
		decoded := DecodedCost * int64(len(raw))
		if !budget.take(decoded) {
			refuseBody(w, errBudget)
			return
		}
		defer budget.release(decoded)
		body := &bufferedBody{raw: raw}
		defer body.release()
		r.Body = body
		next.ServeHTTP(w, r)
	})
}

// refuseBody answers a request whose body could not be read, by why.
func refuseBody(w http.ResponseWriter, err error) {
	// The rest of the body is not wanted: the listener closes the
	// connection after this answer (httpserve's guard) rather than read on.
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, bodyTooLarge(tooBig.Limit))
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

func bodyTooLarge(limit int64) string {
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

// release hands the bytes back to the pool. Nothing may refer to them any
// more: a handler that keeps part of its request copies it (the JSON
// decoders do).
func (b *bufferedBody) release() {
	putBodyBuffer(b.raw)
	b.raw, b.off = nil, 0
}

// bodyBytes returns r's body as readBody left it, if it did.
func bodyBytes(r *http.Request) ([]byte, bool) {
	if b, ok := r.Body.(*bufferedBody); ok && b.off == 0 {
		return b.raw, true
	}
	return nil, false
}

// Body buffers come from pools by size class, powers of two from
// minBodyBuffer to maxPooledBody: a Workspace sync request is tens of
// kilobytes and every request needs one, so taking a fresh buffer (and
// growing it by doubling) each time was most of what a sync allocated.
// A buffer is wiped before it goes back, so that no request's bytes (which
// may include Secrets) outlive it in the pool, and so that a handler that
// wrongly kept a reference sees zeros instead of another request's data.
const (
	minBodyBuffer = 4 << 10
	bodyClasses   = 9
	maxPooledBody = minBodyBuffer << (bodyClasses - 1) // 1 MiB
	// firstBodyBuffer caps the first buffer taken for an announced
	// Content-Length: a client that announces megabytes and sends
	// nothing holds only this much until its bytes arrive.
	firstBodyBuffer = 64 << 10
)

var bodyPools [bodyClasses]sync.Pool

// bodyClass is the index of the smallest size class of at least n bytes,
// or -1 when n is over maxPooledBody.
func bodyClass(n int64) int {
	if n > maxPooledBody {
		return -1
	}
	if n <= minBodyBuffer {
		return 0
	}
	return bits.Len64(uint64(n-1)) - bits.Len64(minBodyBuffer-1)
}

// bodyBufferSize is the capacity of the buffer getBodyBuffer returns for n
// bytes: n's class size, or n itself when it is over every class.
func bodyBufferSize(n int64) int64 {
	if c := bodyClass(n); c >= 0 {
		return minBodyBuffer << c
	}
	return n
}

// getBodyBuffer returns an empty buffer of bodyBufferSize(n) bytes, from the
// pool when there is one.
func getBodyBuffer(n int64) []byte {
	c := bodyClass(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, ok := bodyPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, minBodyBuffer<<c)
}

// putBodyBuffer wipes buf and keeps it for reuse when it is a class size.
func putBodyBuffer(buf []byte) {
	if buf == nil {
		return
	}
	clear(buf)
	c := bodyClass(int64(cap(buf)))
	if c < 0 || minBodyBuffer<<c != cap(buf) {
		return
	}
	buf = buf[:0]
	bodyPools[c].Put(&buf)
}

// readAll reads r to the end like io.ReadAll, into pooled buffers, taking
// every byte of buffer it holds from budget first, so the budget counts the
// memory really held. size is the announced length (-1 when unknown); the
// first buffer fits it, up to firstBodyBuffer, and later ones double, but
// never past the announced length: a body of exactly the limit ends in one
// buffer of its size (and one byte), and while a buffer is copied into the
// next the two together hold less than twice the body. It returns the
// bytes held even on error, for the caller to give back to the budget
// when the request ends; the buffer goes back to the pool through
// putBodyBuffer.
func readAll(r io.Reader, size int64, budget *byteBudget) (buf []byte, held int64, err error) {
	for {
		if len(buf) == cap(buf) {
			// One byte over the announced length, so that the read which
			// finds the end needs no bigger buffer.
			want := int64(2 * cap(buf))
			if buf == nil {
				want = min(max(size+1, minBodyBuffer), firstBodyBuffer)
			}
			if size >= 0 && int64(len(buf)) <= size {
				// The announced length is a cap: a body longer than it
				// is an error of the reader (Go's server stops at it).
				want = min(want, size+1)
			}
			want = bodyBufferSize(want)
			if !budget.take(want) {
				putBodyBuffer(buf)
				return nil, held, errBudget
			}
			held += want
			next := getBodyBuffer(want)[:len(buf)]
			copy(next, buf)
			if buf != nil {
				putBodyBuffer(buf)
				budget.release(int64(cap(buf)))
				held -= int64(cap(buf))
			}
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			putBodyBuffer(buf)
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
	// peak is the most used at once, for tests.
	peak int64
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
	b.peak = max(b.peak, b.used)
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
