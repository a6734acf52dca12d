package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestExitStatus checks that a run nobody answered is an error (make load
// exits non-zero) and that a run against a server is not.
func TestExitStatus(t *testing.T) {
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	defer answering.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	cases := map[string]struct {
		reason  string
		url     string
		wantErr bool
	}{
		"Answered": {reason: "A server that answers gives figures and success.", url: answering.URL},
		"Nobody":   {reason: "With nothing listening every request fails: that is an error, not 0 answered.", url: closed, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := run([]string{"-url", tc.url, "-fixtures", "../../fixtures", "-duration", "200ms", "-workers", "1", "-max-requests", "5"}, io.Discard)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nrun: got %v, want an error: %v", tc.reason, err, tc.wantErr)
			}
		})
	}
}
