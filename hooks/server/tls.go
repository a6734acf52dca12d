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

// TLSConfig builds the hook listener's TLS configuration: the certificate
// from CertReloader, TLS 1.2 at least, and, when clientCAFile is set, client
// certificates required and verified against that bundle (mTLS).
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
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA file %q holds no PEM certificates", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
