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

// NewServer returns an http.Server for h with header, idle and header-size
// limits set, so a slow or hostile client cannot hold connections open.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// Run serves h on ln until ctx ends, then lets in-flight requests finish for
// at most grace. A server closed by Run's own shutdown is a clean exit.
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	srv := NewServer(h)
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
