package httpserve

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// refusals records what a listener reports.
type refusals struct {
	mu  sync.Mutex
	got map[Refusal]int
}

func (r *refusals) add(x Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[Refusal]int{}
	}
	r.got[x]++
}

func (r *refusals) count(x Refusal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[x]
}

// exchange sends raw on a new connection and returns the whole answer,
// which the server ends by closing the connection.
func exchange(t *testing.T, conn net.Conn, raw string) string {
	t.Helper()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, _ := io.ReadAll(conn)
	return string(out)
}

// TestServerErrorsAreJSON sends requests that Go's HTTP server refuses
// itself, before any handler: each answer is the one-line error format
// every other refusal uses, and each is reported.
func TestServerErrorsAreJSON(t *testing.T) {
	var seen refusals
	addr, _ := serve(t, http.NotFoundHandler(), Config{MaxHeaderBytes: 1 << 10, Refused: seen.add})
	cases := map[string]struct {
		reason string
		raw    string
		status string
		body   string
		want   Refusal
	}{
		"HeadersTooLarge": {
			reason: "Headers over MaxHeaderBytes (plus Go's 4 KiB of slack) are a 431.",
			raw:    "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
			status: "HTTP/1.1 431 Request Header Fields Too Large",
			body:   `{"error":"request headers too large"}`,
			want:   Refusal{Kind: RefusedRequest, Reason: "headers-too-large"},
		},
		"BadRequestLine": {
			reason: "A request line that does not parse is a 400, and the line is not echoed.",
			raw:    "GARBAGE secret-token\r\n\r\n",
			status: "HTTP/1.1 400 Bad Request",
			body:   `{"error":"bad request: the request could not be parsed"}`,
			want:   Refusal{Kind: RefusedRequest, Reason: "malformed"},
		},
		"NoHost": {
			reason: "HTTP/1.1 without a Host header is a 400 that says so.",
			raw:    "GET / HTTP/1.1\r\n\r\n",
			status: "HTTP/1.1 400 Bad Request",
			body:   `{"error":"bad request: missing required Host header"}`,
			want:   Refusal{Kind: RefusedRequest, Reason: "malformed"},
		},
		"TransferEncoding": {
			reason: "A transfer encoding Go does not implement is a 501.",
			raw:    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			status: "HTTP/1.1 501 Not Implemented",
			body:   `{"error":"unsupported transfer encoding"}`,
			want:   Refusal{Kind: RefusedRequest, Reason: "transfer-encoding"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := seen.count(tc.want)
			answer := exchange(t, dial(t, addr), tc.raw)
			head, body, _ := strings.Cut(answer, "\r\n\r\n")
			lines := strings.Split(head, "\r\n")
			type reply struct{ Status, ContentType, Body string }
			got := reply{Status: lines[0], Body: strings.TrimSuffix(body, "\n")}
			for _, l := range lines[1:] {
				if v, ok := strings.CutPrefix(l, "Content-Type: "); ok {
					got.ContentType = v
				}
			}
			if diff := cmp.Diff(reply{tc.status, "application/json", tc.body}, got); diff != "" {
				t.Errorf("%s\nanswer: -want, +got:\n%s", tc.reason, diff)
			}
			if n := seen.count(tc.want) - before; n != 1 {
				t.Errorf("%s\n%v reported %d times, want once", tc.reason, tc.want, n)
			}
		})
	}
}

// TestHandshakeFailures fails TLS handshakes in the ways a botched
// rotation does and checks that each is reported with its reason, that
// plain HTTP on the TLS port gets an answer in the error format, and that
// a hundred failures write one log line, not a hundred.
func TestHandshakeFailures(t *testing.T) {
	pki := testpki.New(t)
	_, _, cert := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour))
	var seen refusals
	var logs testsync.Buffer
	addr, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), Config{
		TLS:     &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Refused: seen.add,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})

	t.Run("PlainHTTP", func(t *testing.T) {
		answer := exchange(t, dial(t, addr), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if !strings.HasPrefix(answer, "HTTP/1.1 400 Bad Request\r\n") || !strings.Contains(answer, `{"error":"plain HTTP sent to a TLS port: use https"}`) {
			t.Errorf("plain HTTP to the TLS port: got %q, want a 400 in the error format", answer)
		}
		testsync.WaitFor(t, "the refusal to be reported", func() bool {
			return seen.count(Refusal{Kind: RefusedHandshake, Reason: "not-tls"}) == 1
		})
	})

	t.Run("UntrustedCertificate", func(t *testing.T) {
		const tries = 100
		for range tries {
			// A client whose CA bundle lacks the server's CA, as after a
			// CA rotation that missed it.
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
			if err == nil {
				conn.Close()
				t.Fatal("a handshake without the server's CA succeeded")
			}
		}
		want := Refusal{Kind: RefusedHandshake, Reason: "rejected-by-client"}
		testsync.WaitFor(t, fmt.Sprintf("%d refusals to be reported", tries), func() bool { return seen.count(want) == tries })
		if n := strings.Count(logs.String(), "reason=rejected-by-client"); n != 1 {
			t.Errorf("%d failed handshakes wrote %d log lines, want 1:\n%s", tries, n, logs.String())
		}
	})

	t.Run("Served", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AddCert(cert.Leaf)
		cases := map[string]struct {
			reason string
			offer  []string
			want   string
		}{
			"HTTP2":  {reason: "A client that offers HTTP/2 gets it.", offer: []string{"h2", "http/1.1"}, want: "h2"},
			"HTTP11": {reason: "A client that offers only HTTP/1.1 gets it.", offer: []string{"http/1.1"}, want: "http/1.1"},
			"None":   {reason: "A client that offers nothing by ALPN speaks HTTP/1.1.", want: ""},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				tr := &http.Transport{
					TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12, NextProtos: tc.offer},
					ForceAttemptHTTP2: slices.Contains(tc.offer, "h2"),
				}
				defer tr.CloseIdleConnections()
				var negotiated string
				ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
					TLSHandshakeDone: func(s tls.ConnectionState, _ error) { negotiated = s.NegotiatedProtocol },
				})
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
				resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
				if err != nil {
					t.Fatalf("%s\na request after a good handshake: %v", tc.reason, err)
				}
				resp.Body.Close()
				wantMajor := 1
				if tc.want == "h2" {
					wantMajor = 2
				}
				if negotiated != tc.want || resp.StatusCode != http.StatusOK || resp.ProtoMajor != wantMajor {
					t.Errorf("%s\nnegotiated %q, answered %d over HTTP/%d; want %q, 200 over HTTP/%d", tc.reason, negotiated, resp.StatusCode, resp.ProtoMajor, tc.want, wantMajor)
				}
			})
		}
	})
}
