package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// limits are the http.Server fields a server in this project must set.
type limits struct {
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
}

func TestServerLimits(t *testing.T) {
	cases := map[string]struct {
		reason string
		cfg    Config
		want   limits
	}{
		"Defaults": {
			reason: "Every limit is set even when the caller asks for nothing, so no server runs without read and write timeouts.",
			want:   limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10},
		},
		"Custom": {
			reason: "Read and write timeouts can be set; the other limits stay.",
			cfg:    Config{ReadTimeout: time.Second, WriteTimeout: 2 * time.Second},
			want:   limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Second, WriteTimeout: 2 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(http.NotFoundHandler(), tc.cfg.WithDefaults(), nil, nil)
			got := limits{s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	cases := map[string]struct {
		reason string
		cfg    Config
		want   ConnLimits
	}{
		"Zero":     {reason: "Zero caps take the table's.", want: Defaults.Conns},
		"Set":      {reason: "A cap that is set stays.", cfg: Config{Conns: ConnLimits{Max: 3}}, want: ConnLimits{Max: 3, PerClient: Defaults.Conns.PerClient, Idle: Defaults.Conns.Idle, Streams: Defaults.Conns.Streams}},
		"Negative": {reason: "A negative cap stays negative: it caps nothing.", cfg: Config{Conns: ConnLimits{PerClient: -1}}, want: ConnLimits{Max: Defaults.Conns.Max, PerClient: -1, Idle: Defaults.Conns.Idle, Streams: Defaults.Conns.Streams}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.cfg.WithDefaults()
			if diff := cmp.Diff(tc.want, got.Conns); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if got.ShutdownTimeout != Defaults.ShutdownTimeout || got.Logger == nil {
				t.Errorf("shutdown timeout %v and logger %v: want %v and a logger", got.ShutdownTimeout, got.Logger, Defaults.ShutdownTimeout)
			}
		})
	}
}

// TestReadTimeoutCutsOffStalledBody sends headers promising a body and then
// nothing: the read timeout must end the handler's wait for the body.
func TestReadTimeoutCutsOffStalledBody(t *testing.T) {
	bodyErr := make(chan error, 1)
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		bodyErr <- err
	}), Config{ReadTimeout: 50 * time.Millisecond}.WithDefaults(), nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(context.Background())

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// A liveness bound only: without a read timeout the server would wait
	// for the body for as long as the connection stays open.
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(conn).ReadString('\n')
	select {
	case err := <-bodyErr:
		if err == nil {
			t.Error("reading a body that never came succeeded")
		}
	default:
		t.Error("the handler was still waiting for the body when the connection ended")
	}
}
