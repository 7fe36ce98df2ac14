package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// certLifetime covers any test run; the certificates never leave the test's directory.
const certLifetime = 24 * time.Hour

// keyPair is a certificate with its private key, in memory and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA returns a self-signed certificate authority.
func newCA(commonName string) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return newCert(tmpl, nil)
}

// newServingCert returns a server certificate signed by ca for the given names and IPs.
func newServingCert(ca *keyPair, commonName string, dnsNames []string, ips []net.IP) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}
	return newCert(tmpl, ca)
}

// newClientCert returns a client certificate signed by ca. kube-apiserver maps the common name
// to the user name and the organizations to groups.
func newClientCert(ca *keyPair, user string, groups []string) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return newCert(tmpl, ca)
}

// newCert fills in serial and validity, creates a P-256 key and signs tmpl with parent
// (self-signed when parent is nil).
func newCert(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %q: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial for %q: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour) // tolerate clock skew between processes
	tmpl.NotAfter = time.Now().Add(certLifetime)

	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := ecKeyPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// newSigningKeyPEM returns a fresh P-256 private key in PEM, as used for service-account token
// signing (kube-apiserver signs with ES256 and derives the public key from the same file).
func newSigningKeyPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account signing key: %w", err)
	}
	return ecKeyPEM(key)
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeFiles writes each path → content with mode 0600.
func writeFiles(files map[string][]byte) error {
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}
