package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/internal/filereload"
)

// TLSConfig builds the hook listener's TLS configuration: the serving pair
// from certFile and keyFile, TLS 1.2 at least, and, when clientCAFile is
// set, client certificates required and verified against that bundle
// (mTLS). Each handshake uses the files as they are then (filereload's
// rules: re-read when changed or re-validated, no handshake while broken),
// so cert-manager can renew the pair and the client CA can rotate without
// a restart.
//
// It also returns the files as Credentials, for the readiness probe and
// metrics. A file broken at start is an error: the server would refuse
// every handshake. A serving certificate outside its validity period is
// not: it is served, but the server is not ready until a valid one is in
// the files (see servingPair).
func TLSConfig(certFile, keyFile, clientCAFile string, logger *slog.Logger) (*tls.Config, []Credential, error) {
	if certFile == "" || keyFile == "" {
		return nil, nil, errors.New("TLS needs both a certificate file and a key file")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pair := &servingPair{
		Reloader: filereload.NewKeyPair(certFile, keyFile, filereload.Options{Name: "tls-serving-pair", Logger: logger}),
		logger:   logger,
	}
	if err := pair.Err(); err != nil {
		return nil, nil, err
	}
	_ = pair.Ready() // logs a certificate that is not valid at start
	files := []Credential{pair}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := pair.Get()
			if err == nil {
				// Logs the moment the certificate expires even when no
				// probe asks.
				_ = pair.validity(c)
			}
			return c, err
		},
	}
	if clientCAFile == "" {
		return cfg, files, nil
	}
	cas := clientCAs{filereload.NewCABundle(clientCAFile, filereload.Options{Name: "tls-client-ca", Logger: logger})}
	bundle, err := cas.Get()
	if err != nil {
		return nil, nil, err
	}
	files = append(files, cas)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	// Set here too, although every handshake gets its own below: a nil
	// ClientCAs would mean the system roots.
	cfg.ClientCAs = bundle.Pool
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		bundle, err := cas.Get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.ClientCAs = bundle.Pool
		return c, nil
	}
	return cfg, files, nil
}

// certificates is a Credential holding certificates, whose expiry the
// metrics export.
type certificates interface {
	Credential
	// NotAfter is when the file's first certificate expires; false while
	// the file is broken.
	NotAfter() (time.Time, bool)
}

// servingPair is the serving certificate and key. Besides loading, the
// certificate must be within its validity period for the server to be
// ready: an expired certificate (or one not yet valid, from a clock or an
// issuer ahead of this node) is still served, since refusing the
// handshake would tell clients less, but a replica serving it leaves the
// Service. Crossing the boundary either way is logged once.
type servingPair struct {
	*filereload.Reloader[*tls.Certificate]
	logger *slog.Logger

	mu      sync.Mutex
	invalid bool // as last logged
}

// Ready returns nil while the certificate is valid now, or while the pair
// is broken (Err reports that).
func (p *servingPair) Ready() error {
	c, err := p.Get()
	if err != nil {
		return nil
	}
	return p.validity(c)
}

// validity says whether c is valid now, and logs a change since the last
// call. The error names the file, not the certificate: probes are
// unauthenticated.
func (p *servingPair) validity(c *tls.Certificate) error {
	leaf, now := c.Leaf, time.Now()
	var problem string
	switch {
	case now.After(leaf.NotAfter):
		problem = "has expired"
	case now.Before(leaf.NotBefore):
		problem = "is not yet valid"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case problem != "" && !p.invalid:
		p.logger.Error("serving certificate outside its validity period, not ready until a valid one is in the files",
			"file", p.Name(), "problem", problem, "notBefore", leaf.NotBefore, "notAfter", leaf.NotAfter)
	case problem == "" && p.invalid:
		p.logger.Info("serving certificate valid again", "file", p.Name(), "notAfter", leaf.NotAfter)
	}
	p.invalid = problem != ""
	if problem != "" {
		return fmt.Errorf("serving certificate %s %s", p.Name(), problem)
	}
	return nil
}

// NotAfter is when the served certificate expires.
func (p *servingPair) NotAfter() (time.Time, bool) {
	pair, err := p.Get()
	if err != nil {
		return time.Time{}, false
	}
	return pair.Leaf.NotAfter, true
}

// clientCAs is the bundle client certificates are verified against.
type clientCAs struct {
	*filereload.Reloader[*filereload.CABundle]
}

// NotAfter is when the bundle's first CA expires, and with it the client
// certificates it signed.
func (c clientCAs) NotAfter() (time.Time, bool) {
	b, err := c.Get()
	if err != nil {
		return time.Time{}, false
	}
	return b.NotAfter, true
}
