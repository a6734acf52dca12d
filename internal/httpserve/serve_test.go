package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
)

func TestIsJSON(t *testing.T) {
	cases := map[string]struct {
		reason string
		ct     string
		want   bool
	}{
		"Plain":       {reason: "The usual content type.", ct: "application/json", want: true},
		"WithCharset": {reason: "Parameters are accepted: most clients add charset=utf-8.", ct: "application/json; charset=utf-8", want: true},
		"UpperCase":   {reason: "Media types are case-insensitive.", ct: "Application/JSON", want: true},
		"Empty":       {reason: "No content type is not JSON.", ct: ""},
		"Text":        {reason: "Another type is refused.", ct: "text/plain"},
		"Prefix":      {reason: "A type that only starts like JSON is another type.", ct: "application/jsonx"},
		"Malformed":   {reason: "A header that does not parse is refused.", ct: "application/json; charset"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, IsJSON(tc.ct)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, http.StatusBadRequest, "cannot\n  decode   body")
	type reply struct {
		Code              int
		ContentType, Body string
	}
	want := reply{Code: 400, ContentType: "application/json", Body: `{"error":"cannot decode body"}` + "\n"}
	if diff := cmp.Diff(want, reply{rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()}); diff != "" {
		t.Errorf("one line in the error format: -want, +got:\n%s", diff)
	}
}

// serve runs Serve on a loopback listener until the test ends.
func serve(t *testing.T, h http.Handler, cfg Config) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, cfg) }()
	var result error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return ln.Addr().String(), stop
}

// closedByServer reports whether the server closed conn without a word.
func closedByServer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConnLimitsPerClient(t *testing.T) {
	addr, _ := serve(t, http.NotFoundHandler(), Config{Conns: ConnLimits{PerClient: 2}})
	first, second := dial(t, addr), dial(t, addr)
	third := dial(t, addr)
	got := []bool{closedByServer(t, first), closedByServer(t, second), closedByServer(t, third)}
	if diff := cmp.Diff([]bool{false, false, true}, got); diff != "" {
		t.Errorf("connections closed at once: -want, +got:\n%s", diff)
	}
	// A slot freed is a slot for the same client again, once the server
	// has seen the connection close.
	_ = first.Close()
	testsync.WaitFor(t, "a new connection to be kept after one of the two closed", func() bool {
		return !closedByServer(t, dial(t, addr))
	})
}

func TestConnLimitsMax(t *testing.T) {
	addr, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), Config{Conns: ConnLimits{Max: 1}})
	holder := dial(t, addr)
	waiting := dial(t, addr)
	if _, err := io.WriteString(waiting, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if closedByServer(t, waiting) {
		t.Fatal("the connection over Max was closed instead of waiting")
	}
	_ = waiting.SetReadDeadline(time.Time{})
	_ = holder.Close()
	_ = waiting.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 12)
	if _, err := io.ReadFull(waiting, buf); err != nil {
		t.Fatalf("the waiting connection was not served once the other closed: %v", err)
	}
	if diff := cmp.Diff("HTTP/1.1 200", string(buf)); diff != "" {
		t.Errorf("answer: -want, +got:\n%s", diff)
	}
}

func TestConnLimitsIdle(t *testing.T) {
	// The server is built here rather than by Serve, to learn when a
	// connection has gone idle.
	cfg := Config{Conns: ConnLimits{Idle: 1}}.WithDefaults()
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), cfg, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var idled atomic.Int32
	track := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		track(c, s)
		if s == http.StateIdle {
			idled.Add(1)
		}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	request := func(c net.Conn) {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, len("HTTP/1.1 200 OK"))); err != nil {
			t.Fatal(err)
		}
	}
	first, second := dial(t, addr), dial(t, addr)
	request(first)
	testsync.WaitFor(t, "the first connection to go idle", func() bool { return idled.Load() == 1 })
	request(second)
	// The rest of each answer is still buffered; what matters is whether
	// the server closed the connection after it.
	drainAndCheck := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := io.ReadAll(c)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	got := []bool{drainAndCheck(first), drainAndCheck(second)}
	if diff := cmp.Diff([]bool{false, true}, got); diff != "" {
		t.Errorf("kept-alive connections closed: -want, +got:\n%s", diff)
	}
}

func TestServeStops(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	addr, stop := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
	}), Config{ShutdownTimeout: 50 * time.Millisecond})
	go func() {
		resp, err := http.Get("http://" + addr)
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if err := stop(); err == nil {
		t.Error("Serve returned nil although a request outlived the shutdown timeout")
	}
	close(release)

	addr, stop = serve(t, http.NotFoundHandler(), Config{})
	if _, err := http.Get("http://" + addr); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("a clean shutdown: %v, want nil", err)
	}
}

func TestReadJSON(t *testing.T) {
	type reply struct {
		OK   bool
		Code int
		Body string
	}
	cases := map[string]struct {
		reason  string
		ct      string
		body    string
		chunked bool
		want    reply
	}{
		"Fits":        {reason: "A JSON body within the limit is returned.", ct: "application/json; charset=utf-8", body: `{"a":1}`, want: reply{OK: true, Code: 200, Body: `{"a":1}`}},
		"NotJSON":     {reason: "Another content type is a 415.", ct: "text/plain", body: `{}`, want: reply{Code: 415, Body: `{"error":"content type must be application/json"}` + "\n"}},
		"LongLength":  {reason: "A Content-Length over the limit is refused before reading.", ct: "application/json", body: strings.Repeat(" ", 20), want: reply{Code: 413, Body: `{"error":"request body exceeds 16 bytes"}` + "\n"}},
		"LongChunked": {reason: "A body with no length is cut off at the limit.", ct: "application/json", body: strings.Repeat(" ", 20), chunked: true, want: reply{Code: 413, Body: `{"error":"request body exceeds 16 bytes"}` + "\n"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ct)
			if tc.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			body, ok := ReadJSON(rec, req, 16)
			got := reply{OK: ok, Code: rec.Code, Body: rec.Body.String()}
			if ok {
				got.Body = string(body)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
