package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceAccountTokenLifetime is the lifetime requested for ServiceAccount tokens: longer than
// any test, so a long-running CCM never sees its token expire.
const serviceAccountTokenLifetime = 2 * time.Hour

// authInfo is a kubeconfig user: a client certificate or a bearer token.
type authInfo struct {
	certPEM, keyPEM []byte
	token           string
}

// writeKubeconfig writes a kubeconfig with one cluster, one user and one current context; every
// credential is embedded, so the file stands alone.
func writeKubeconfig(path, host string, caPEM []byte, user string, auth authInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: auth.certPEM,
		ClientKeyData:         auth.keyPEM,
		Token:                 auth.token,
	}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountKubeconfig returns the path of a kubeconfig that authenticates as the
// ServiceAccount namespace/name, with a token from the TokenRequest API (the identity a pod of
// that ServiceAccount gets, valid for 2 hours). The ServiceAccount must exist (for example from
// ApplyKustomize); the test fails otherwise.
func (c *Cluster) ServiceAccountKubeconfig(t T, namespace, name string) string {
	t.Helper()
	token := c.serviceAccountToken(t, namespace, name)
	path := filepath.Join(c.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
	if err := writeKubeconfig(path, c.Host, c.caPEM, user, authInfo{token: token}); err != nil {
		t.Fatalf("kubeconfig of serviceaccount %s/%s: %v", namespace, name, err)
	}
	return path
}

// ServiceAccountClient returns a client that authenticates as the ServiceAccount namespace/name,
// like ServiceAccountKubeconfig.
func (c *Cluster) ServiceAccountClient(t T, namespace, name string) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{
		Host:            c.Host,
		BearerToken:     c.serviceAccountToken(t, namespace, name),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client of serviceaccount %s/%s: %v", namespace, name, err)
	}
	return client
}

func (c *Cluster) serviceAccountToken(t T, namespace, name string) string {
	t.Helper()
	seconds := int64(serviceAccountTokenLifetime / time.Second)
	tr, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for serviceaccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}
