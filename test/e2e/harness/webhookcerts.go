package harness

import (
	"net"
	"path/filepath"
)

// ServingCert is a test CA and a serving certificate it signed, written to files.
type ServingCert struct {
	// CAPEM is the CA's certificate, for a caBundle.
	CAPEM []byte
	// CertFile and KeyFile are the serving certificate and its key.
	CertFile, KeyFile string
}

// NewServingCert creates a CA and a serving certificate for 127.0.0.1 and localhost (a webhook
// the harness apiserver calls on loopback) in the test's directory.
func NewServingCert(t T, name string) ServingCert {
	t.Helper()
	ca, err := newCA(name + "-ca")
	if err != nil {
		t.Fatalf("%v", err)
	}
	kp, err := newServingCert(ca, name, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatalf("%v", err)
	}
	dir := t.TempDir()
	sc := ServingCert{CAPEM: ca.certPEM, CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if err := writeFiles(map[string][]byte{sc.CertFile: kp.certPEM, sc.KeyFile: kp.keyPEM}); err != nil {
		t.Fatalf("%v", err)
	}
	return sc
}
