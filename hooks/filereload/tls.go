package filereload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// NewKeyPair watches a PEM certificate and key. A pair that does not match
// (the certificate rotated, the key not yet) is broken until both files
// agree again.
func NewKeyPair(certFile, keyFile string, opts Options) *Reloader[*tls.Certificate] {
	return New(opts, func(c [][]byte) (*tls.Certificate, error) {
		// tls errors describe the problem, never the key.
		pair, err := tls.X509KeyPair(c[0], c[1])
		if err != nil {
			return nil, err
		}
		return &pair, nil
	}, certFile, keyFile)
}

// NewCertPool watches a PEM bundle of CA certificates; a file without any
// certificate is broken, since an empty pool would trust nobody (as a
// client CA) or fall back to nothing useful.
func NewCertPool(file string, opts Options) *Reloader[*x509.CertPool] {
	return New(opts, func(c [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c[0]) {
			return nil, errors.New("no PEM certificate in the file")
		}
		return pool, nil
	}, file)
}
