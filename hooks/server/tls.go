package server

import (
	"crypto/tls"
	"errors"
	"log/slog"

	"github.com/formspec/formspec-hooks/hooks/filereload"
)

// TLSConfig builds the hook listener's TLS configuration: the serving pair
// from certFile and keyFile, TLS 1.2 at least, and, when clientCAFile is
// set, client certificates required and verified against that bundle
// (mTLS). Each handshake uses the files as they are then (filereload's
// rules: re-read when changed, no handshake while broken), so cert-manager
// can renew the pair and the client CA can rotate without a restart.
//
// It also returns the files as Credentials, for the readiness probe and
// metrics. A file broken at start is an error: the server would refuse
// every handshake.
func TLSConfig(certFile, keyFile, clientCAFile string, logger *slog.Logger) (*tls.Config, []Credential, error) {
	if certFile == "" || keyFile == "" {
		return nil, nil, errors.New("TLS needs both a certificate file and a key file")
	}
	pair := filereload.NewKeyPair(certFile, keyFile, filereload.Options{Name: "tls-serving-pair", Logger: logger})
	if err := pair.Err(); err != nil {
		return nil, nil, err
	}
	files := []Credential{pair}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return pair.Get()
		},
	}
	if clientCAFile == "" {
		return cfg, files, nil
	}
	cas := filereload.NewCertPool(clientCAFile, filereload.Options{Name: "tls-client-ca", Logger: logger})
	pool, err := cas.Get()
	if err != nil {
		return nil, nil, err
	}
	files = append(files, cas)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	// Set here too, although every handshake gets its own below: a nil
	// ClientCAs would mean the system roots.
	cfg.ClientCAs = pool
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := cas.Get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.ClientCAs = pool
		return c, nil
	}
	return cfg, files, nil
}
