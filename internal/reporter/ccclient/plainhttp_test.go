package ccclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
)

// TestRedirectToPlainHTTPNotFollowed: an https Cluster Control that
// redirects to plain http on the same host would get the bearer token sent
// in clear (Go keeps Authorization on a same-host redirect); the reporter
// does not follow it.
func TestRedirectToPlainHTTPNotFollowed(t *testing.T) {
	var plainCalls atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainCalls.Add(1)
	}))
	defer plain.Close()
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("reporter-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := NewFileToken(tokenFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, _, err := NewHTTPClient(pki.CAFile, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(srv.URL)
	c := &Client{Base: base, HTTP: hc, Token: tok, Timeout: 10 * time.Second, Now: time.Now}
	res := c.Do(context.Background(), http.MethodGet, "/v1/deploy-status", nil, "", nil)
	if !errors.Is(res.Err, errLeftHTTPS) || res.Outcome != Retry {
		t.Errorf("call redirected to plain http: outcome %v, error %v; want a retry with errLeftHTTPS", res.Outcome, res.Err)
	}
	if n := plainCalls.Load(); n != 0 {
		t.Errorf("the plain http server was called %d times; want none", n)
	}
}
