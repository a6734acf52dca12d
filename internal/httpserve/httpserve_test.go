package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// TestBodyTimeoutBoundsTheBody sends headers promising a body, then the
// body after a pause, or never. BodyTimeout is the body's bound, whatever
// ReadTimeout says: guard replaces net/http's read deadline with its own
// once the headers are in, so a short ReadTimeout does not cut off a body
// that comes within BodyTimeout, and a short BodyTimeout cuts off one that
// never comes.
func TestBodyTimeoutBoundsTheBody(t *testing.T) {
	cases := map[string]struct {
		reason string
		cfg    Config
		// pause is how long the client waits before sending the body;
		// a negative pause sends none.
		pause time.Duration
		// want is the body the handler reads, wantErr the error its read
		// ends with.
		want    string
		wantErr error
	}{
		"StalledBodyCutOff": {
			reason:  "A body that never comes ends the handler's wait after BodyTimeout.",
			cfg:     Config{BodyTimeout: 50 * time.Millisecond, ReadTimeout: time.Hour},
			pause:   -1,
			wantErr: os.ErrDeadlineExceeded,
		},
		"ReadTimeoutSparesTheBody": {
			reason: "A body that comes within BodyTimeout is read in full, though ReadTimeout has passed.",
			cfg:    Config{ReadTimeout: 50 * time.Millisecond, BodyTimeout: 10 * time.Second},
			pause:  300 * time.Millisecond,
			want:   "0123456789",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			type result struct {
				body string
				err  error
			}
			got := make(chan result, 1)
			srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				got <- result{string(b), err}
			}), tc.cfg.WithDefaults(), nil, nil)
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
			if tc.pause >= 0 {
				time.Sleep(tc.pause) // the pause is what the case is about
				if _, err := io.WriteString(conn, "0123456789"); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case r := <-got:
				if diff := cmp.Diff(tc.wantErr, r.err, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\nthe handler's read error (-want, +got):\n%s", tc.reason, diff)
				}
				if diff := cmp.Diff(tc.want, r.body); diff != "" {
					t.Errorf("%s\nthe body the handler read (-want, +got):\n%s", tc.reason, diff)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s\nthe handler was still waiting for the body after 5s", tc.reason)
			}
		})
	}
}
