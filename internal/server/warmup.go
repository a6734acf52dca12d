package server

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// WarmCall is one request a server makes of its own hooks before it
// listens (WarmUp). Name says which it is in an error.
type WarmCall struct {
	Name, Path string
	Body       []byte
}

// WarmUp serves each call, in the process, on the router routes would
// have with the default limits, so that the first calls of a new server
// cost what later ones do: a hook's first call otherwise compiles the
// codec's programs for its types and brings its code into memory. Call it
// before Run, so that readiness passes only afterwards. The routes should
// be hooks built without effects outside their answers (nothing handed
// off, counted or logged): the calls are not real. What the transport
// logs of them goes to logger (nil discards): a panic's stack, a failed
// hook, and each call at debug level. It returns an error naming every
// call that was not answered 200.
func WarmUp(logger *slog.Logger, routes []Route, calls []WarmCall) error {
	h, err := newRouter(Config{Routes: routes, Logger: logger}.withDefaults())
	if err != nil {
		return err
	}
	var failed []string
	for _, c := range calls {
		req, err := http.NewRequest(http.MethodPost, c.Path, bytes.NewReader(c.Body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		w := &statusWriter{header: http.Header{}}
		h.ServeHTTP(w, req)
		// A handler that writes nothing answers 200, as recorder counts it.
		if code := cmp.Or(w.code, http.StatusOK); code != http.StatusOK {
			failed = append(failed, fmt.Sprintf("%s (%s) answered %d", c.Path, c.Name, code))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("warm-up calls failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// statusWriter keeps an answer's status and drops its body.
type statusWriter struct {
	header http.Header
	code   int
}

func (w *statusWriter) Header() http.Header { return w.header }

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
