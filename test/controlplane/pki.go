package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of a test control plane's certificates and keys.
type pki struct {
	caCert      []byte // PEM
	caFile      string
	servingCert string
	servingKey  string
	saKey       string // service-account signing key (private; its public half is derived)
}

// CA is a private certificate authority for tests, valid for a day.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate, PEM-encoded.
	CertPEM []byte
}

// NewCA generates an ECDSA P-256 CA named commonName.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cannot create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// IssueServing signs a serving certificate (digital signature, server
// auth) for dnsNames and ips with a new ECDSA P-256 key, and returns both
// PEM-encoded, the key in SEC 1 form.
func (ca *CA) IssueServing(commonName string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writePKI generates a CA, an API server serving certificate for 127.0.0.1
// and localhost signed by it, and a service-account signing key, all valid
// for a day, and writes them under dir/pki.
func writePKI(dir string) (*pki, error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("formspec-test-ca")
	if err != nil {
		return nil, err
	}
	// 10.96.0.1 is the kubernetes Service's ClusterIP (the first address of
	// --service-cluster-ip-range), which pods of test/node's one-node
	// cluster dial with their in-cluster configuration.
	servingCert, servingKey, err := ca.IssueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	p := &pki{
		caCert:      ca.CertPEM,
		caFile:      filepath.Join(pkiDir, "ca.crt"),
		servingCert: filepath.Join(pkiDir, "apiserver.crt"),
		servingKey:  filepath.Join(pkiDir, "apiserver.key"),
		saKey:       filepath.Join(pkiDir, "sa.key"),
	}
	for path, data := range map[string][]byte{p.caFile: p.caCert, p.servingCert: servingCert, p.servingKey: servingKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	if err := writeECKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	return p, nil
}

func writeECKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// writeKubeconfig writes a kubeconfig for a bearer-token user, for the
// controller manager and for people debugging a kept control plane.
func writeKubeconfig(path, server, token string, caPEM []byte) error {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
`, server, base64.StdEncoding.EncodeToString(caPEM), token)
	return os.WriteFile(path, []byte(kubeconfig), 0o600)
}
