// Package testpki makes a throwaway CA and leaf certificates on disk for
// tests of TLS serving and file reloading.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the files of the leaf certificates it signed.
type PKI struct {
	// Dir holds the files.
	Dir string
	// CA is the CA certificate; CAFile holds it as PEM and Pool trusts it.
	CA     *x509.Certificate
	CAFile string
	Pool   *x509.CertPool
	caKey  *ecdsa.PrivateKey
}

// New creates a CA in a new temporary directory.
func New(t testing.TB) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "formspec test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: t.TempDir(), CA: ca, caKey: key, Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.CAFile = filepath.Join(p.Dir, "ca.crt")
	WritePEM(t, p.CAFile, "CERTIFICATE", der, time.Now())
	return p
}

// Issue signs a leaf for 127.0.0.1, valid from an hour ago to an hour from
// now, with the given serial and usage, and writes it to name.crt and
// name.key in Dir with the given modification time.
func (p *PKI) Issue(t testing.TB, name string, serial int64, usage x509.ExtKeyUsage, mtime time.Time) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	now := time.Now()
	return p.IssueValid(t, name, serial, usage, mtime, now.Add(-time.Hour), now.Add(time.Hour))
}

// IssueValid is Issue with the validity period given, for a certificate
// that has expired or is not yet valid.
func (p *PKI) IssueValid(t testing.TB, name string, serial int64, usage x509.ExtKeyUsage, mtime, notBefore, notAfter time.Time) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	WritePEM(t, certFile, "CERTIFICATE", der, mtime)
	WritePEM(t, keyFile, "EC PRIVATE KEY", keyDER, mtime)
	cert, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// WritePEM writes der as one PEM block with the given modification time,
// which makes a change visible on file systems with coarse timestamps.
func WritePEM(t testing.TB, path, blockType string, der []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
