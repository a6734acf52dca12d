package reporter

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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

func TestParseClusterControlURL(t *testing.T) {
	cases := map[string]struct {
		reason string
		cfg    Config
		want   error
	}{
		"HTTPS": {
			reason: "https with a token is what the install uses.",
			cfg:    Config{ClusterControlURL: "https://formspec-ctl.formspec-system:7070", TokenFile: "token"},
		},
		"PlainHTTPWithToken": {
			reason: "A token over plain HTTP off the loopback is refused.",
			cfg:    Config{ClusterControlURL: "http://formspec-ctl.formspec-system:7070", TokenFile: "token"},
			want:   ErrPlainHTTP,
		},
		"PlainHTTPWithTokenAllowed": {
			reason: "InsecureHTTP (--insecure-http) lets it through.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070", TokenFile: "token", InsecureHTTP: true},
		},
		"PlainHTTPWithoutToken": {
			reason: "Without a token there is no credential to lose; New warns instead.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070"},
		},
		"LoopbackWithToken": {
			reason: "On the loopback (make run) nothing crosses a network.",
			cfg:    Config{ClusterControlURL: "http://127.0.0.1:8480", TokenFile: "token"},
		},
		"LocalhostWithToken": {
			reason: "localhost is the loopback too.",
			cfg:    Config{ClusterControlURL: "http://localhost:8480", TokenFile: "token"},
		},
		"Query": {
			reason: "A query is refused before anything else, even where plain HTTP would be too.",
			cfg:    Config{ClusterControlURL: "http://10.0.0.1:7070/?token=x", TokenFile: "token"},
			want:   weburl.ErrQuery,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tc.cfg.ParseClusterControlURL("--cluster-control-url")
			if diff := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

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
	tok, err := newFileToken(tokenFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, _, err := newHTTPClient(pki.CAFile, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(srv.URL)
	c := &ccClient{base: base, http: hc, token: tok, timeout: 10 * time.Second, now: time.Now}
	res := c.do(context.Background(), http.MethodGet, "/v1/deploy-status", nil, "", nil)
	if !errors.Is(res.err, errLeftHTTPS) || res.outcome != retry {
		t.Errorf("call redirected to plain http: outcome %v, error %v; want a retry with errLeftHTTPS", res.outcome, res.err)
	}
	if n := plainCalls.Load(); n != 0 {
		t.Errorf("the plain http server was called %d times; want none", n)
	}
}
