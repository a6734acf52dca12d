package server

import (
	"net/http/pprof"

	"github.com/go-chi/chi/v5"
)

// mountPprof serves Go's profiler on r under /debug/pprof/, as
// net/http/pprof would on the default mux. A CPU profile or trace asked for
// with ?seconds= must finish within the listener's WriteTimeout (60 s by
// default).
func mountPprof(r chi.Router) {
	r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// Index lists the profiles and serves the named ones (heap,
	// goroutine, ...) from the rest of the path.
	r.HandleFunc("/debug/pprof/*", pprof.Index)
}
