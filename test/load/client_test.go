package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testReqs are two small fixtures; each body names its own index, so a
// server can tell whether X-Fixture matches the body it came with.
var testReqs = []request{
	{path: "/v1/workspace/sync", name: "zero", body: []byte(`{"fixture":0}`)},
	{path: "/v1/workspace/sync", name: "one", body: []byte(`{"fixture":1}`)},
}

// checkRequest is what every test server asks of a request before it
// answers as told: anything else gets a 400, which shows up in the codes.
func checkRequest(r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(r.Header.Get("X-Fixture"))
	if err != nil || n < 0 || n >= len(testReqs) {
		return fmt.Errorf("bad X-Fixture %q", r.Header.Get("X-Fixture"))
	}
	switch {
	case r.Method != http.MethodPost, r.URL.Path != testReqs[n].path:
		return fmt.Errorf("got %s %s", r.Method, r.URL.Path)
	case r.Header.Get("Content-Type") != "application/json":
		return fmt.Errorf("got Content-Type %q", r.Header.Get("Content-Type"))
	case !bytes.Equal(body, testReqs[n].body):
		return fmt.Errorf("X-Fixture %d came with body %s", n, body)
	}
	return nil
}

// goServer is a net/http server running h behind checkRequest; conns
// counts the connections it accepted.
func goServer(t *testing.T, h http.HandlerFunc) (base string, conns *atomic.Int64) {
	conns = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkRequest(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, conns
}

// rawServer reads requests with net/http's parser and writes answer
// byte for byte, so that a test controls exactly what the client reads.
// It closes the connection after each answer when hangUp is set, and
// never answers at all when answer is empty.
func rawServer(t *testing.T, answer string, hangUp bool) (base string, conns *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					out := answer
					if err := checkRequest(r); err != nil {
						out = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
					}
					if out == "" {
						_, _ = io.Copy(io.Discard, c) // until the client gives up
						return
					}
					if _, err := io.WriteString(c, out); err != nil || hangUp {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), conns
}

// TestDrive runs the driver against servers that answer in every way the
// client must understand or refuse, and counts what it saw.
func TestDrive(t *testing.T) {
	type summary struct {
		Codes    map[int]int
		Answered int
		Failures int
		Conns    int64
	}
	answer := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"status":{},"children":[]}`))
		}
	}
	cases := map[string]struct {
		reason  string
		handler http.HandlerFunc // a net/http server, or else:
		raw     string           // a raw server's answer
		hangUp  bool             // the raw server closes after answering
		want    summary
	}{
		"KeepAlive": {
			reason:  "A keep-alive server serves every request of a worker on one connection.",
			handler: answer(http.StatusOK),
			want:    summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 1},
		},
		"NotOK": {
			reason:  "An error status is an answer, counted under its code, and keeps the connection.",
			handler: answer(http.StatusServiceUnavailable),
			want:    summary{Codes: map[int]int{503: 6}, Answered: 6, Conns: 1},
		},
		"ChunkedByNetHTTP": {
			reason: "A body net/http streams (flushed before the end) arrives chunked and is read to its end.",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(bytes.Repeat([]byte("a"), 5000))
				w.(http.Flusher).Flush()
				_, _ = w.Write(bytes.Repeat([]byte("b"), 7000))
			},
			want: summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 1},
		},
		"ChunkedWithExtensionAndTrailer": {
			reason: "Chunk extensions and trailer fields are skipped; the next response starts where this one ends.",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n4;name=value\r\n{\"a\"\r\nA\r\n:12345678}\r\n0\r\nX-Trailer: t\r\n\r\n",
			want:   summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 1},
		},
		"NoContent": {
			reason: "A 204 has no body even without Content-Length; the connection stays usable.",
			raw:    "HTTP/1.1 204 No Content\r\n\r\n",
			want:   summary{Codes: map[int]int{204: 6}, Answered: 6, Conns: 1},
		},
		"HTTP10": {
			reason: "An HTTP/1.0 answer (Python's http.server) ends the connection: the client redials for each request.",
			raw:    "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
			hangUp: true,
			want:   summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 6},
		},
		"ConnectionClose": {
			reason: "Connection: close ends an HTTP/1.1 connection too.",
			raw:    "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\n{}",
			hangUp: true,
			want:   summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 6},
		},
		"BodyUntilClose": {
			reason: "A body with neither length nor chunks ends when the server closes.",
			raw:    "HTTP/1.0 200 OK\r\n\r\n{\"status\":{}}",
			hangUp: true,
			want:   summary{Codes: map[int]int{200: 6}, Answered: 6, Conns: 6},
		},
		"MalformedStatusLine": {
			reason: "A status line without a three-digit code is a failure, and the connection is dropped.",
			raw:    "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
			want:   summary{Failures: 6, Conns: 6},
		},
		"NotHTTP": {
			reason: "A server that does not speak HTTP fails every request.",
			raw:    "SSH-2.0-OpenSSH_9.6\r\n",
			want:   summary{Failures: 6, Conns: 6},
		},
		"TruncatedBody": {
			reason: "A body shorter than its Content-Length is a failure, not an answer.",
			raw:    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
			hangUp: true,
			want:   summary{Failures: 6, Conns: 6},
		},
		"MalformedChunkSize": {
			reason: "A chunk size that is not hex is a failure.",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
			want:   summary{Failures: 6, Conns: 6},
		},
		"ChunkLongerThanItsSize": {
			reason: "A chunk with more bytes than its size says is a failure.",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n0\r\n\r\n",
			want:   summary{Failures: 6, Conns: 6},
		},
		"UnsupportedTransferEncoding": {
			reason: "A transfer coding other than chunked is refused rather than misread.",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
			want:   summary{Failures: 6, Conns: 6},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var base string
			var conns *atomic.Int64
			if tc.handler != nil {
				base, conns = goServer(t, tc.handler)
			} else {
				base, conns = rawServer(t, tc.raw, tc.hangUp)
			}
			target, err := newTarget(base, testReqs)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := drive(ctx, target, 1, 6)
			got := summary{Codes: r.codes, Answered: len(r.latencies), Failures: r.failures, Conns: conns.Load()}
			if len(got.Codes) == 0 {
				got.Codes = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndrive: -want, +got:\n%s\nfirst failure: %v", tc.reason, diff, r.firstErr)
			}
		})
	}
}

// TestDriveRoundEnds checks that a request the round's deadline cuts short
// is neither an answer nor a failure, and that nothing dials after it.
func TestDriveRoundEnds(t *testing.T) {
	base, conns := rawServer(t, "", false) // reads requests, never answers
	target, err := newTarget(base, testReqs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan *result)
	go func() { done <- drive(ctx, target, 2, 1000) }()
	var r *result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second): // a hang, not a measurement
		t.Fatal("drive is still waiting for an answer 10s after its round ended")
	}
	if len(r.latencies) != 0 || r.failures != 0 || len(r.codes) != 0 {
		t.Errorf("a stalled round: got %d answered, %d failed (%v), codes %v; want none of them", len(r.latencies), r.failures, r.firstErr, r.codes)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("got %d connections, want one per worker (2)", n)
	}
}

// TestDriveRefused checks that requests nobody takes are failures.
func TestDriveRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close()
	target, err := newTarget(base, testReqs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := drive(ctx, target, 1, 3)
	var op *net.OpError
	if r.failures != 3 || len(r.latencies) != 0 || !errors.As(r.firstErr, &op) || op.Op != "dial" {
		t.Errorf("nothing listening: got %d failed (first: %v), %d answered; want 3 dial failures", r.failures, r.firstErr, len(r.latencies))
	}
}

// TestNewTarget pins the bytes a request goes out as, and the loopback
// rule.
func TestNewTarget(t *testing.T) {
	cases := map[string]struct {
		reason  string
		base    string
		want    []string
		wantErr bool
	}{
		"Loopback": {
			reason: "Each request is serialised once, with its index in X-Fixture.",
			base:   "http://127.0.0.1:8080",
			want: []string{
				"POST /v1/workspace/sync HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 13\r\nX-Fixture: 0\r\n\r\n" + `{"fixture":0}`,
				"POST /v1/workspace/sync HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 13\r\nX-Fixture: 1\r\n\r\n" + `{"fixture":1}`,
			},
		},
		"Remote": {
			reason:  "A load test never leaves the machine.",
			base:    "http://192.0.2.1:8080",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			target, err := newTarget(tc.base, testReqs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nnewTarget: got error %v, want one: %v", tc.reason, err, tc.wantErr)
			}
			var got []string
			if target != nil {
				for _, w := range target.wire {
					got = append(got, string(w))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nnewTarget: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
