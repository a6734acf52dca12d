package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// CertReloader serves a certificate and key from files and picks up new
// files without a restart, because cert-manager renews serving certificates
// in place and a restart per renewal would drop in-flight hooks.
type CertReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod time.Time
	keyMod  time.Time
}

// NewCertReloader loads the pair once, so that a bad pair stops the server at
// start rather than failing every handshake.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	c := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is for tls.Config.GetCertificate. It checks the files'
// modification times on each handshake and reloads when either changed. A
// pair that fails to load (the certificate was written but not yet the key)
// leaves the previous certificate in service until the next handshake tries
// again.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certMod, keyMod, err := c.modTimes()
	c.mu.Lock()
	changed := err == nil && (!certMod.Equal(c.certMod) || !keyMod.Equal(c.keyMod))
	c.mu.Unlock()
	if changed {
		_ = c.reload()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, nil
}

func (c *CertReloader) modTimes() (time.Time, time.Time, error) {
	ci, err := os.Stat(c.certFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("cannot stat certificate: %w", err)
	}
	ki, err := os.Stat(c.keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("cannot stat key: %w", err)
	}
	return ci.ModTime(), ki.ModTime(), nil
}

func (c *CertReloader) reload() error {
	// Stat before reading: if a file changes between the two, the next
	// handshake sees a newer time and reloads again.
	certMod, keyMod, err := c.modTimes()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("cannot load TLS key pair: %w", err)
	}
	c.mu.Lock()
	c.cert, c.certMod, c.keyMod = &cert, certMod, keyMod
	c.mu.Unlock()
	return nil
}

// caReloader serves a client CA bundle from a file and picks up a new one
// without a restart, so that the CA that signs Metacontroller's client
// certificate can be rotated like the serving certificate.
type caReloader struct {
	file string

	mu   sync.Mutex
	pool *x509.CertPool
	mod  time.Time
}

func newCAReloader(file string) (*caReloader, error) {
	r := &caReloader{file: file}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// current returns the bundle, reloading it when the file changed. A file
// that does not load (being rewritten) keeps the last good bundle.
func (r *caReloader) current() *x509.CertPool {
	if fi, err := os.Stat(r.file); err == nil {
		r.mu.Lock()
		changed := !fi.ModTime().Equal(r.mod)
		r.mu.Unlock()
		if changed {
			_ = r.reload()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pool
}

func (r *caReloader) reload() error {
	fi, err := os.Stat(r.file)
	if err != nil {
		return fmt.Errorf("cannot read client CA file: %w", err)
	}
	pem, err := os.ReadFile(r.file)
	if err != nil {
		return fmt.Errorf("cannot read client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("client CA file %q holds no PEM certificates", r.file)
	}
	r.mu.Lock()
	r.pool, r.mod = pool, fi.ModTime()
	r.mu.Unlock()
	return nil
}

// TLSConfig builds the hook listener's TLS configuration: the certificate
// from CertReloader, TLS 1.2 at least, and, when clientCAFile is set, client
// certificates required and verified against that bundle (mTLS). Both the
// pair and the bundle are re-read when their files change.
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	certs, err := NewCertReloader(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: certs.GetCertificate,
	}
	if clientCAFile != "" {
		cas, err := newCAReloader(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = cas.current()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// Each handshake gets the bundle as it is now.
		base := cfg.Clone()
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = cas.current()
			return c, nil
		}
	}
	return cfg, nil
}
