package filereload

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"time"
)

// NewKeyPair watches a PEM certificate and key. A pair that does not match
// (the certificate rotated, the key not yet) is broken until both files
// agree again. The value's Leaf is the parsed certificate.
func NewKeyPair(certFile, keyFile string, opts Options) *Reloader[*tls.Certificate] {
	return New(opts, func(c [][]byte) (*tls.Certificate, error) {
		// tls errors describe the problem, never the key.
		pair, err := tls.X509KeyPair(c[0], c[1])
		if err != nil {
			return nil, err
		}
		if pair.Leaf == nil {
			// Go leaves Leaf empty only under GODEBUG=x509keypairleaf=0.
			if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
				return nil, err
			}
		}
		return &pair, nil
	}, certFile, keyFile)
}

// CABundle is a bundle of CA certificates as loaded.
type CABundle struct {
	// Pool trusts every certificate of the bundle.
	Pool *x509.CertPool
	// NotAfter is the earliest expiry among them: from then on, some
	// certificate the bundle trusted no longer verifies.
	NotAfter time.Time
}

// NewCABundle watches a PEM bundle of CA certificates; a file without any
// certificate is broken, since an empty pool would trust nobody (as a
// client CA) or fall back to nothing useful. Like
// x509.CertPool.AppendCertsFromPEM, it skips blocks that are not
// certificates or do not parse.
func NewCABundle(file string, opts Options) *Reloader[*CABundle] {
	return New(opts, func(c [][]byte) (*CABundle, error) { return parseCABundle(c[0]) }, file)
}

// NewCertPool is NewCABundle for a caller that needs only the pool.
func NewCertPool(file string, opts Options) *Reloader[*x509.CertPool] {
	return New(opts, func(c [][]byte) (*x509.CertPool, error) {
		b, err := parseCABundle(c[0])
		if err != nil {
			return nil, err
		}
		return b.Pool, nil
	}, file)
}

func parseCABundle(raw []byte) (*CABundle, error) {
	b := &CABundle{Pool: x509.NewCertPool()}
	n := 0
	for len(raw) > 0 {
		var block *pem.Block
		if block, raw = pem.Decode(raw); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		b.Pool.AddCert(cert)
		if n == 0 || cert.NotAfter.Before(b.NotAfter) {
			b.NotAfter = cert.NotAfter
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in the file")
	}
	return b, nil
}
