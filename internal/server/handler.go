// Package server is the HTTP transport of the hook server: it turns pure hook
// functions into handlers and owns everything that is about HTTP and not about
// Workspaces — decoding, body limits, authentication, overload protection,
// ETags, metrics, TLS, health probes and graceful shutdown.
//
// Error responses are always one stable line in httpserve's error format,
// {"error":"..."}, because Metacontroller copies a failed hook's body into
// an Event on the user's object: they never echo request bytes (a request
// may carry Secrets) and never carry Go error details that change from one
// call to the next.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/formspec/formspec-hooks/internal/codec"

	"github.com/formspec/formspec-hooks/internal/httpserve"
)

// Hook is a pure hook function: it gets a decoded, validated request and
// returns the response to encode. An error means a bug, not a decision about
// the user's object; decisions belong in the response's status.
type Hook[Req, Resp any] func(ctx context.Context, req *Req) (*Resp, error)

// objectCounter is implemented by request types that carry other objects
// besides their parent (metacontroller.CompositeRequest and
// DecoratorRequest).
type objectCounter interface {
	ObjectCount() int
}

// badRequest is an error a hook returns for a request it cannot serve
// because of what the request holds (metacontroller.InvalidObjectError is
// one); the transport answers it with a 400 instead of a 500.
type badRequest interface {
	error
	BadRequest() bool
}

// tooLarge is an error for a request that carries more than a hook serves
// (metacontroller.LimitError is one); the transport answers it with a 413.
// Its text is sent to the caller, so it must be stable and must not quote
// the request.
type tooLarge interface {
	error
	TooLarge() bool
}

// validator is implemented by request types that can tell a request that
// cannot be served at all (no parent object) from one a hook must decide
// about. Its error text is sent to the caller, so it must be stable and must
// not quote the request.
type validator interface {
	Validate() error
}

// bodyDecoder is implemented by request types that decode themselves:
// metacontroller's, which skip the controller object, and
// workspace.Request, which also keeps its body for the hook to decode more
// of later. The body is valid until the hook has returned: it then goes
// back to the buffer pool, wiped.
type bodyDecoder interface {
	Decode(body []byte) error
}

func decodeRequest(raw []byte, req any) error {
	if d, ok := req.(bodyDecoder); ok {
		return d.Decode(raw)
	}
	return codec.Unmarshal(raw, req)
}

// hookHandler adapts a hook to HTTP; HookRoute makes one for the router,
// which has read the body within its limits before the handler runs.
type hookHandler[Req, Resp any] struct {
	name       string
	hook       Hook[Req, Resp]
	maxObjects int
	logger     *slog.Logger
}

func (hh *hookHandler[Req, Resp]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !httpserve.IsJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusBadRequest, "content type must be application/json")
		return
	}
	raw, ok := bodyBytes(r)
	if !ok {
		// Only the router builds these handlers, and it reads every body
		// first (readBody).
		hh.logger.ErrorContext(r.Context(), "hook handler served without its router", "hook", hh.name)
		writeError(w, http.StatusInternalServerError, "hook "+hh.name+" failed")
		return
	}
	req := new(Req)
	if err := decodeRequest(raw, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON request body")
		return
	}
	if v, ok := any(req).(validator); ok {
		if err := v.Validate(); err != nil {
			if tl, ok := errors.AsType[tooLarge](err); ok && tl.TooLarge() {
				writeError(w, http.StatusRequestEntityTooLarge, err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, "invalid request: "+err.Error())
			return
		}
	}
	if c, ok := any(req).(objectCounter); ok && c.ObjectCount() > hh.maxObjects {
		// Refused before the hook runs, so that no request, however it
		// was made, costs more than a bounded amount of hook work.
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request carries more than %d objects", hh.maxObjects))
		return
	}

	resp, err := hh.hook(r.Context(), req)
	if err != nil {
		if ctxErr := r.Context().Err(); ctxErr != nil {
			// The caller gave up (Metacontroller's hook timeout); the hook
			// only noticed. Not a bug, and nobody reads this answer.
			hh.logger.DebugContext(r.Context(), "hook abandoned by caller", "hook", hh.name, "err", ctxErr)
			writeError(w, http.StatusServiceUnavailable, "request canceled")
			return
		}
		if tl, ok := errors.AsType[tooLarge](err); ok && tl.TooLarge() {
			// A count the hook checks before it works, such as the owner
			// keys of a related Datastore.
			writeError(w, http.StatusRequestEntityTooLarge, tl.Error())
			return
		}
		var bad badRequest
		if errors.As(err, &bad) && bad.BadRequest() {
			// An object in the request does not fit its type: the
			// caller's mistake. The detail goes to the debug log only,
			// since it may quote a field name from the user's object.
			hh.logger.DebugContext(r.Context(), "hook refused the request", "hook", hh.name, "err", err)
			writeError(w, http.StatusBadRequest, "invalid request: an object does not decode into its type")
			return
		}
		hh.logger.ErrorContext(r.Context(), "hook failed", "hook", hh.name, "err", err)
		writeError(w, http.StatusInternalServerError, "hook "+hh.name+" failed")
		return
	}
	if resp == nil {
		hh.logger.ErrorContext(r.Context(), "hook returned no response", "hook", hh.name)
		writeError(w, http.StatusInternalServerError, "hook "+hh.name+" failed")
		return
	}
	buf := getBuffer()
	defer putBuffer(buf)
	if err := encode(buf, resp); err != nil {
		hh.logger.ErrorContext(r.Context(), "cannot encode hook response", "hook", hh.name, "err", err)
		writeError(w, http.StatusInternalServerError, "hook "+hh.name+" failed")
		return
	}
	body := buf.Bytes()

	etag := strongETag(body)
	w.Header().Set("ETag", etag)
	if ifNoneMatch(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// encode renders v into buf the same way every time: the codec sorts map
// keys, and the hooks sort everything else that came from a map.
func encode(buf *bytes.Buffer, v any) error {
	if err := codec.Encode(buf, v); err != nil {
		return fmt.Errorf("cannot encode response: %w", err)
	}
	return nil
}

// Response buffers are reused: a Workspace answer is several kilobytes and
// every sync needs one. A buffer that grew past maxPooledBuffer (a rare,
// huge answer) is dropped rather than kept for every later request.
const maxPooledBuffer = 1 << 20

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	buf := buffers.Get().(*bytes.Buffer)
	buf.Reset()
	return buf
}

// putBuffer returns buf to the pool once nothing refers to its bytes any
// more: ServeHTTP calls it after the body was written.
func putBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuffer {
		buffers.Put(buf)
	}
}

// strongETag is byte-exact: a hash of the whole body, so two bodies share a
// tag only when they are identical.
func strongETag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// ifNoneMatch reports whether any If-None-Match header matches etag. The
// header is a comma-separated list, may repeat, and uses the weak comparison
// (RFC 9110 §13.1.2), so a W/ prefix on the client's copy still matches.
// "*" is not honoured: a 304 tells the client to reuse a body it cached for
// this exact answer, and a client that sends "*" has no such body.
func ifNoneMatch(headers []string, etag string) bool {
	for _, h := range headers {
		for _, candidate := range strings.Split(h, ",") {
			candidate = strings.TrimSpace(candidate)
			if strings.TrimPrefix(candidate, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// writeError answers with one stable line in httpserve's error format.
func writeError(w http.ResponseWriter, code int, msg string) {
	httpserve.WriteError(w, code, msg)
}
