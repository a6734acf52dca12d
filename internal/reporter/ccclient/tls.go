package ccclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/formspec/formspec-hooks/internal/filereload"
)

// NewHTTPClient builds the client towards Cluster Control: optional CA
// bundle and client certificate on top of Go's defaults. Both are read
// under filereload's rules for every new connection, so rotating them needs
// no restart, and a broken file fails the handshake instead of presenting
// or trusting stale material. It also returns the files it reads.
func NewHTTPClient(caFile, certFile, keyFile string, logger *slog.Logger) (*http.Client, []Credential, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var files []Credential
	if (certFile == "") != (keyFile == "") {
		return nil, nil, fmt.Errorf("client certificate and key must be given together")
	}
	if certFile != "" {
		pair := filereload.NewKeyPair(certFile, keyFile, filereload.Options{Name: "cluster-control-client-cert", Logger: logger})
		if err := pair.Err(); err != nil {
			return nil, nil, err
		}
		files = append(files, pair)
		tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.Get()
		}
	}
	if caFile != "" {
		roots := filereload.NewCertPool(caFile, filereload.Options{Name: "cluster-control-ca", Logger: logger})
		pool, err := roots.Get()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, roots)
		// Through an HTTPS proxy the transport does the handshake itself
		// with this config: the bundle as it was at start.
		tlsCfg.RootCAs = pool
		tr.DialTLSContext = dialTLSWith(tlsCfg, roots)
	}
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr, CheckRedirect: keepHTTPS}, files, nil
}

// errLeftHTTPS is a redirect from https to plain http, not followed.
var errLeftHTTPS = errors.New("cluster control redirected an https call to plain http; not followed")

// keepHTTPS follows redirects as Go does, but never from https to plain
// http: Go sends Authorization on to a redirect that stays on the same
// host, so such a redirect would carry the bearer token in clear.
func keepHTTPS(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return errLeftHTTPS
	}
	return nil
}

// dialTLSWith dials TLS connections that verify the server, in Go's usual
// way, against the CA bundle as roots holds it at dial time: a client's
// RootCAs cannot change under a running transport, so each connection gets
// a config of its own.
func dialTLSWith(base *tls.Config, roots *filereload.Reloader[*x509.CertPool]) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		pool, err := roots.Get()
		if err != nil {
			return nil, err
		}
		cfg := base.Clone()
		cfg.RootCAs = pool
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("cannot dial %q: %w", addr, err)
			}
			cfg.ServerName = host
		}
		d := &tls.Dialer{Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
}

// Credential is a credentials file the reporter reads, watched by the
// formspec_reporter_credentials_file_ok gauge.
type Credential interface {
	// Name identifies the file; never secret.
	Name() string
	// Err is nil while the file loads.
	Err() error
}
