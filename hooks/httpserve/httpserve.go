// Package httpserve runs the reporter's and the reference Cluster Control's
// HTTP listeners with the limits every server in this project carries.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Default request timeouts. The largest body any of these servers takes is
// a 16 MiB node-health report, which crosses a cluster network in well
// under a second, and every client here gives up sooner (the reporter after
// 10s, the hook server's hand-off after 2s): 30s only ever cuts off a
// client that has stalled or is trickling bytes to hold a connection.
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

// Timeouts bound one request. Zero fields take the defaults.
type Timeouts struct {
	// Read bounds reading a whole request, headers and body.
	Read time.Duration
	// Write bounds the time from the end of the request headers to the end
	// of the answer. A handler that deliberately holds a request longer
	// (the reference Cluster Control's Delay fault) extends its own
	// deadlines with http.ResponseController.
	Write time.Duration
}

// WithDefaults returns t with its zero fields set to the defaults.
func (t Timeouts) WithDefaults() Timeouts {
	if t.Read <= 0 {
		t.Read = DefaultReadTimeout
	}
	if t.Write <= 0 {
		t.Write = DefaultWriteTimeout
	}
	return t
}

// NewServer returns an http.Server for h with header, read, write, idle and
// header-size limits set, so a slow or hostile client cannot hold
// connections open.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	t = t.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// Run serves h on ln with the default timeouts until ctx ends, then lets
// in-flight requests finish for at most grace. A server closed by Run's own
// shutdown is a clean exit.
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	srv := NewServer(h, Timeouts{})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("cannot shut down %s cleanly: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve on %s: %w", ln.Addr(), err)
	}
	return nil
}
