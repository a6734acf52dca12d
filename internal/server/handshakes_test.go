package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHandshakesPerCall makes 2,000 hook calls through the hook server
// over TLS with a bearer token, from a client made as Metacontroller
// 4.17.2 makes its hook client (pkg/hooks/webhook.go: a clone of Go's
// default transport, which attempts HTTP/2 and keeps two idle
// connections per host, with the CA bundle and TLS 1.2 at least) and as
// many workers as Metacontroller runs per controller (--workers, 5), each
// pausing a millisecond between calls as a worker does while it reads
// and writes the API server. It counts the TLS handshakes the way
// Metacontroller's metric does (httptrace's TLSHandshakeDone, the
// tls_handshake_done event of metacontroller_*_tls_duration_histogram_seconds),
// once over HTTP/1.1 (the same client with HTTP/2 taken away: what it
// negotiates with a server that offers only HTTP/1.1, as this one did)
// and once over HTTP/2, and prints the figures:
//
//	go test ./internal/server -run HandshakesPerCall -v
//
// Over HTTP/1.1 a worker that finds no idle connection dials one, and
// the third connection to go idle is closed: hundreds of handshakes. Over
// HTTP/2 the workers share one connection: a handshake for each worker
// that called before the first connection was up, and none after. That
// count is the assertion (at most 5 per 1,000 calls), never a time.
func TestHandshakesPerCall(t *testing.T) {
	tlsCfg, pool := serverTLS(t)
	hookURL, _, _ := startServer(t, Config{
		Routes: echoRoutes(),
		Tokens: testTokens(t),
		TLS:    tlsCfg,
	})
	const calls, workers = 2000, 5
	cases := map[string]struct {
		http2 bool
		// most is the most handshakes the calls may take; zero asserts
		// nothing.
		most int
	}{
		"HTTP1": {},
		"HTTP2": {http2: true, most: calls * 5 / 1000},
	}
	// HTTP/1.1 first, so that the two figures print in order.
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			if !tc.http2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			var handshakes atomic.Int64
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
					if err == nil {
						handshakes.Add(1)
					}
				},
			})
			var mu sync.Mutex
			var took []time.Duration
			codes := map[int]int{}
			protos := map[string]int{}
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range calls / workers {
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hookURL+"/v1/echo/sync", strings.NewReader(validBody))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer t0ken")
						start := time.Now()
						resp, err := client.Do(req)
						code, proto := 0, ""
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							code, proto = resp.StatusCode, resp.Proto
						}
						mu.Lock()
						took = append(took, time.Since(start))
						codes[code]++
						protos[proto]++
						mu.Unlock()
						time.Sleep(time.Millisecond)
					}
				})
			}
			wg.Wait()
			slices.Sort(took)
			n := handshakes.Load()
			t.Logf("%d calls from %d workers over %v: %d TLS handshakes (%.1f per 1,000 calls); a call took %v (median)",
				calls, workers, protos, n, float64(n)*1000/calls, took[len(took)/2].Round(time.Microsecond))
			if fmt.Sprint(codes) != fmt.Sprintf("map[200:%d]", calls) {
				t.Errorf("answers %v, want %d 200s", codes, calls)
			}
			if tc.most > 0 && n > int64(tc.most) {
				t.Errorf("%d TLS handshakes for %d calls, want at most %d", n, calls, tc.most)
			}
		})
	}
}
