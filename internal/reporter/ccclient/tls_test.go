package ccclient

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
)

// TestTLSFilesReload rotates the CA bundle and the client certificate
// under a running client: each new connection uses the files as they are,
// a broken file fails the handshake, and the server's name is still
// checked against its certificate.
func TestTLSFilesReload(t *testing.T) {
	serverPKI, clientPKI := testpki.New(t), testpki.New(t)
	serverCert, serverKey, _ := serverPKI.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	pair, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPKI.Pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	caFile := serverPKI.CAFile
	clientCert, clientKey, _ := clientPKI.Issue(t, "reporter-a", 10, x509.ExtKeyUsageClientAuth, time.Unix(1000, 0))
	client, _, err := NewHTTPClient(caFile, clientCert, clientKey, nil)
	if err != nil {
		t.Fatalf("NewHTTPClient: %v", err)
	}
	call := func() string {
		client.CloseIdleConnections()
		resp, err := client.Get(srv.URL)
		if err != nil {
			return "error"
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return string(b[:n])
	}

	other := testpki.New(t)
	steps := []struct {
		reason string
		change func()
		want   string
	}{
		{reason: "The client certificate is presented and the server verified.", change: func() {}, want: "reporter-a"},
		{reason: "A renewed client certificate is presented without a restart.", change: func() {
			clientPKI.Issue(t, "reporter-b", 11, x509.ExtKeyUsageClientAuth, time.Unix(2000, 0))
			_ = os.Rename(clientPKI.Dir+"/reporter-b.crt", clientCert)
			_ = os.Rename(clientPKI.Dir+"/reporter-b.key", clientKey)
		}, want: "reporter-b"},
		{reason: "A CA bundle rotated to a CA that did not sign the server fails the handshake.", change: func() {
			testpki.WritePEM(t, caFile, "CERTIFICATE", other.CA.Raw, time.Unix(3000, 0))
		}, want: "error"},
		{reason: "The bundle rotated back is trusted again.", change: func() {
			testpki.WritePEM(t, caFile, "CERTIFICATE", serverPKI.CA.Raw, time.Unix(4000, 0))
		}, want: "reporter-b"},
		{reason: "A broken client key fails the handshake rather than presenting the old pair.", change: func() {
			if err := os.WriteFile(clientKey, []byte("not a key"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "error"},
	}
	for i, s := range steps {
		s.change()
		if diff := cmp.Diff(s.want, call()); diff != "" {
			t.Errorf("step %d: %s\n-want, +got:\n%s", i, s.reason, diff)
		}
	}
}

// TestTLSChecksServerName: a certificate from the trusted CA for another
// name is refused, also when Cluster Control is addressed by IP.
func TestTLSChecksServerName(t *testing.T) {
	pki := testpki.New(t)
	certFile, keyFile, _ := pki.Issue(t, "server", 1, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0))
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	client, _, err := NewHTTPClient(pki.CAFile, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The certificate names 127.0.0.1 only; localhost is the same server
	// under a name the certificate does not carry.
	for url, wantErr := range map[string]bool{srv.URL: false, "https://localhost:" + srv.URL[len("https://127.0.0.1:"):]: true} {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		if diff := cmp.Diff(wantErr, err != nil); diff != "" {
			t.Errorf("GET %s: failed: -want, +got:\n%s\nerr: %v", url, diff, err)
		}
	}
}
