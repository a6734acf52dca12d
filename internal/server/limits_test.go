package server

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/testkit/hostile"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

func post(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	return postWith(t, &http.Client{Timeout: 20 * time.Second}, url, body, header)
}

// postWith is post with client.
func postWith(t *testing.T, client *http.Client, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func echoRoutes() []Route {
	return []Route{HookRoute("/v1/echo/sync", echoHook)}
}

// TestSlowClientsHoldNoSlot fills every hook slot's worth of requests
// with clients trickling a body, and checks that a normal request is still
// served: a slot is taken only once the body is read. Over HTTP/2 the slow
// requests share one connection, and the normal request goes on it too.
func TestSlowClientsHoldNoSlot(t *testing.T) {
	for name, p := range protocols(t) {
		t.Run(name, func(t *testing.T) {
			const slots = 4
			hookURL, metricsURL, _ := startServer(t, Config{Routes: echoRoutes(), MaxInFlight: slots, TLS: p.tls})

			var conn *hostile.Conn
			var slow []*hostile.Stream
			for range slots {
				if conn == nil || p.proto == hostile.HTTP1 {
					conn = p.dial(t, "", hookURL)
				}
				s, err := conn.Send(http.MethodPost, "/v1/echo/sync", hookHeaders(1000), "{", false)
				if err != nil {
					t.Fatal(err)
				}
				slow = append(slow, s)
			}
			// Every slow request is in the server's handlers, reading its
			// body, before the normal one is sent.
			testsync.WaitFor(t, fmt.Sprintf("%d slow requests in flight", slots), func() bool {
				_, body := get(t, http.DefaultClient, metricsURL+"/metrics")
				return strings.Contains(body, fmt.Sprintf("formspec_hooks_in_flight_requests %d\n", slots))
			})
			for _, s := range slow {
				if err := s.Write(" "); err != nil {
					t.Fatalf("a slow client was cut off early: %v", err)
				}
			}
			if p.proto == hostile.HTTP1 {
				conn = p.dial(t, "", hookURL)
			}
			s, err := conn.Send(http.MethodPost, "/v1/echo/sync", hookHeaders(len(validBody)), validBody, true)
			if err != nil {
				t.Fatal(err)
			}
			code, err := s.Status(20 * time.Second)
			if err != nil {
				t.Fatalf("normal request beside %d slow clients: %v", slots, err)
			}
			if diff := cmp.Diff(http.StatusOK, code); diff != "" {
				t.Errorf("normal request beside %d slow clients: -want, +got:\n%s", slots, diff)
			}
		})
	}
}

// TestBodyTimeout checks that a client trickling a body is cut off after
// BodyTimeout, well before the server's read timeout. Over HTTP/2 the
// timeout ends that stream only: a request in progress on the same
// connection is answered.
func TestBodyTimeout(t *testing.T) {
	for name, p := range protocols(t) {
		t.Run(name, func(t *testing.T) {
			block := newBlockingHook()
			hookURL, _, _ := startServer(t, Config{
				Routes: append(echoRoutes(), HookRoute("/v1/block/sync", block.hook)),
				TLS:    p.tls,
				HTTP:   httpserve.Config{BodyTimeout: 100 * time.Millisecond},
			})
			conn := p.dial(t, "", hookURL)
			var other *hostile.Stream
			if p.proto == hostile.HTTP2 {
				var err error
				if other, err = conn.Send(http.MethodPost, "/v1/block/sync", hookHeaders(len(validBody)), validBody, true); err != nil {
					t.Fatal(err)
				}
				<-block.entered
			}
			s, err := conn.Send(http.MethodPost, "/v1/echo/sync", hookHeaders(1000), "{", false)
			if err != nil {
				t.Fatal(err)
			}
			// A liveness bound only.
			code, err := s.Status(20 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(http.StatusRequestTimeout, code); diff != "" {
				t.Errorf("status: -want, +got:\n%s", diff)
			}
			close(block.release)
			if other != nil {
				if code, err := other.Status(20 * time.Second); err != nil || code != http.StatusOK {
					t.Errorf("the request in progress on the same connection: %d, %v; want 200", code, err)
				}
			}
		})
	}
}

// TestContentLengthOverLimit announces a body over the limit with
// "Expect: 100-continue": the server refuses it before reading, so the
// client never gets "100 Continue" and sends nothing.
func TestContentLengthOverLimit(t *testing.T) {
	for name, p := range protocols(t) {
		t.Run(name, func(t *testing.T) {
			hookURL, _, _ := startServer(t, Config{Routes: echoRoutes(), TLS: p.tls})
			header := hookHeaders(1000000000)
			header["Expect"] = "100-continue"
			s, err := p.dial(t, "", hookURL).Send(http.MethodPost, "/v1/echo/sync", header, "", false)
			if err != nil {
				t.Fatal(err)
			}
			code, err := s.Status(20 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				Informed []int
				Code     int
			}
			if diff := cmp.Diff(answer{Code: http.StatusRequestEntityTooLarge}, answer{s.Informed(), code}); diff != "" {
				t.Errorf("answers: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestInFlightBytes holds most of the byte budget with a half-sent body and
// checks that another body that would go over the budget gets 429, and is
// served once the first request is gone.
func TestInFlightBytes(t *testing.T) {
	for name, p := range protocols(t) {
		t.Run(name, func(t *testing.T) {
			// The budget counts buffer capacity, in size classes that
			// double from 4 KiB, and then DecodedCost bytes per body byte
			// once a body is read: the request below announces 40 KiB and
			// so holds 64 KiB before half of it has arrived; the 30 KiB
			// body would take its 32 KiB buffer and 240 KiB decoded more,
			// which fits alone but not beside it.
			const budget = 300 << 10
			hookURL, metricsURL, _ := startServer(t, Config{Routes: echoRoutes(), MaxInFlightBytes: budget, TLS: p.tls})

			held := strings.Repeat(" ", 20<<10)
			conn := p.dial(t, "", hookURL)
			if _, err := conn.Send(http.MethodPost, "/v1/echo/sync", hookHeaders(2*len(held)), held, false); err != nil {
				t.Fatal(err)
			}
			testsync.WaitFor(t, "the half-sent body to be held", func() bool {
				_, scrape := get(t, http.DefaultClient, metricsURL+"/metrics")
				return !strings.Contains(scrape, "formspec_hooks_in_flight_request_bytes 0\n")
			})

			client := p.client()
			big := `{"parent":{"pad":"` + strings.Repeat("x", 30<<10) + `"}}`
			code, body := postWith(t, client, hookURL+"/v1/echo/sync", big, nil)
			if diff := cmp.Diff(reply{Code: http.StatusTooManyRequests, Body: errBody("too many request bytes in flight")}, reply{Code: code, Body: body}); diff != "" {
				t.Errorf("body over the budget: -want, +got:\n%s", diff)
			}
			if code, _ := postWith(t, client, hookURL+"/v1/echo/sync", validBody, nil); code != http.StatusOK {
				t.Errorf("small body within the budget: code %d, want 200", code)
			}

			_ = conn.Close()
			testsync.WaitFor(t, "the budget to be given back", func() bool {
				_, scrape := get(t, http.DefaultClient, metricsURL+"/metrics")
				return strings.Contains(scrape, "formspec_hooks_in_flight_request_bytes 0\n")
			})
			if code, _ := postWith(t, client, hookURL+"/v1/echo/sync", big, nil); code != http.StatusOK {
				t.Errorf("the same body once the budget is free: code %d, want 200", code)
			}
		})
	}
}

// TestProbesOnlyOnMetricsListener: the hook listener has no unauthenticated
// probes; the metrics listener has them.
func TestProbesOnlyOnMetricsListener(t *testing.T) {
	hookURL, metricsURL, _ := startServer(t, Config{Routes: echoRoutes()})
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, http.DefaultClient, hookURL+p); code != http.StatusNotFound {
			t.Errorf("GET %s on the hook listener: code %d, want 404", p, code)
		}
		if code, _ := get(t, http.DefaultClient, metricsURL+p); code != http.StatusOK {
			t.Errorf("GET %s on the metrics listener: code %d, want 200", p, code)
		}
	}
}

// TestBrokenTokenFileFailsClosed deletes and empties the token file under a
// running server: every token is refused, /readyz fails and the metric says
// so, until the file is fixed; formspec_hooks_auth_tokens counts the file's
// tokens, a second one during a rotation, and is absent while it is broken.
func TestBrokenTokenFileFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "token-a\n", time.Unix(1000, 0))
	tokens := filereload.NewTokens(path, filereload.Options{Name: "auth-tokens"})
	hookURL, metricsURL, _ := startServer(t, Config{Routes: echoRoutes(), Tokens: tokens})

	type state struct {
		Hook, Ready int
		Metric      bool
		// Tokens is formspec_hooks_auth_tokens' line, "" when absent.
		Tokens string
	}
	observe := func() state {
		hook, _ := post(t, hookURL+"/v1/echo/sync", validBody, map[string]string{"Authorization": "Bearer token-a"})
		ready, _ := get(t, http.DefaultClient, metricsURL+"/readyz")
		_, scrape := get(t, http.DefaultClient, metricsURL+"/metrics")
		var tokens string
		for _, line := range strings.Split(scrape, "\n") {
			if strings.HasPrefix(line, "formspec_hooks_auth_tokens{") {
				tokens = line
			}
		}
		return state{Hook: hook, Ready: ready, Metric: strings.Contains(scrape, `formspec_hooks_credentials_file_ok{file="auth-tokens"} 1`), Tokens: tokens}
	}
	ok := state{Hook: 200, Ready: 200, Metric: true, Tokens: `formspec_hooks_auth_tokens{file="auth-tokens"} 1`}
	broken := state{Hook: 401, Ready: 503}

	steps := []struct {
		reason string
		change func()
		want   state
	}{
		{reason: "A good file serves.", change: func() {}, want: ok},
		{reason: "An emptied file refuses the token it held.", change: func() { writeFile(t, path, "", time.Unix(1001, 0)) }, want: broken},
		{reason: "A fixed file serves again.", change: func() { writeFile(t, path, "token-a\n", time.Unix(1002, 0)) }, want: ok},
		{reason: "A second token, as a rotation adds it, is counted beside the first, which still serves.", change: func() { writeFile(t, path, "token-a\ntoken-b\n", time.Unix(1003, 0)) }, want: state{Hook: 200, Ready: 200, Metric: true, Tokens: `formspec_hooks_auth_tokens{file="auth-tokens"} 2`}},
		{reason: "Back to one token.", change: func() { writeFile(t, path, "token-a\n", time.Unix(1004, 0)) }, want: ok},
		{reason: "A deleted file refuses every token.", change: func() { _ = os.Remove(path) }, want: broken},
		{reason: "An unreadable path (a directory) refuses every token.", change: func() { _ = os.Mkdir(path, 0o700) }, want: broken},
	}
	for i, s := range steps {
		s.change()
		if diff := cmp.Diff(s.want, observe()); diff != "" {
			t.Errorf("step %d: %s\n-want, +got:\n%s", i, s.reason, diff)
		}
	}
}
