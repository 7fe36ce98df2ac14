// Package harness runs a real Kubernetes control plane (etcd and kube-apiserver, no kubelet and
// no kube-controller-manager) on loopback for the end-to-end tests of hcloud-policy-ccm and for
// the demo (cmd/ccm-demo), and gives them what they need around it: an admin client, a
// kubeconfig of any ServiceAccount (so the CCM runs with exactly the RBAC of deploy/), Node
// objects as a kubelet with --cloud-provider=external registers them, child processes with
// captured logs, and a poll helper.
//
// The binaries come from $KUBE_BIN_DIR (default $HOME/.cache/hcloud-policy-ccm/kube-v1.37.2),
// built by `make kube-bins` (test/tools/build.sh). A missing binary fails the test with that
// instruction; it never skips.
//
// Typical use:
//
//	c := harness.Start(t)
//	c.ApplyKustomize(t, "../../deploy")
//	kubeconfig := c.ServiceAccountKubeconfig(t, "kube-system", "hcloud-cloud-controller-manager")
//	c.CreateNode(t, "worker-1", "10.244.1.0/24")
//	ccm := harness.StartProcess(t, "ccm", bin, []string{"--kubeconfig=" + kubeconfig, ...}, env)
//	harness.WaitFor(t, time.Minute, func() (bool, error) { ... })
//
// Functions take a T: a *testing.T, or the demo's runner (a logger and a stack of cleanups run
// on exit).
//
// # Notes
//
//   - Every process logs to a file in LogDir(t), which is kept (and its path logged, with the
//     tail of each log) when the test fails.
//   - Each Start costs about 5-15 s (etcd, then kube-apiserver's post-start hooks). Share one
//     Cluster between subtests where the subtests do not interfere.
package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultKubeVersion is the Kubernetes version the binaries are built at by default.
const DefaultKubeVersion = "v1.37.2"

// ServiceClusterIPRange is the --service-cluster-ip-range of the apiserver.
const ServiceClusterIPRange = "10.96.0.0/16"

// Cluster is a running etcd and kube-apiserver on loopback, stopped when the test ends.
type Cluster struct {
	// Host is the apiserver URL, https://127.0.0.1:<port>.
	Host string
	// Kubeconfig is the path of a kubeconfig file of a cluster admin (group system:masters).
	Kubeconfig string
	// Dir holds the certificates, keys and kubeconfigs of this cluster.
	Dir string
	// BinDir is where kube-apiserver, etcd and kubectl were found.
	BinDir string
	// Etcd and APIServer are the two processes.
	Etcd, APIServer *Process

	caPEM  []byte
	admin  *rest.Config
	client kubernetes.Interface
}

// Option changes how Start runs the control plane.
type Option func(*options)

type options struct {
	apiserverArgs []string
	startTimeout  time.Duration
}

// WithAPIServerArgs appends flags to kube-apiserver's command line; a flag given twice takes the
// later value, so this also overrides the harness's defaults (for example
// "--authorization-mode=RBAC").
func WithAPIServerArgs(args ...string) Option {
	return func(o *options) { o.apiserverArgs = append(o.apiserverArgs, args...) }
}

// WithStartTimeout sets how long Start waits for etcd and for the apiserver to be ready (default
// 2 minutes, generous because test machines are shared).
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// BinDir returns the directory of the kube binaries: $KUBE_BIN_DIR, or
// $HOME/.cache/hcloud-policy-ccm/kube-v1.37.2 (where `make kube-bins` puts them) when unset.
func BinDir() string {
	if d := os.Getenv("KUBE_BIN_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "hcloud-policy-ccm", "kube-"+DefaultKubeVersion)
}

// Bin returns the path of one of the kube binaries (kube-apiserver, etcd, kubectl), failing the
// test with the fix when it is missing.
func Bin(t T, name string) string {
	t.Helper()
	dir := BinDir()
	path := filepath.Join(dir, name)
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("%s not found in KUBE_BIN_DIR=%q: run `make kube-bins` (or test/tools/build.sh %s %s) "+
			"and set KUBE_BIN_DIR to that directory", name, dir, dir, DefaultKubeVersion)
	}
	return path
}

// Start runs etcd and kube-apiserver for test t and returns once the apiserver is ready and its
// bootstrap objects (namespace kube-system, RBAC roles, the extension-apiserver-authentication
// ConfigMap) exist. Both processes are stopped when the test ends. Start fails the test on any
// error, with the tail of the process logs.
//
// The apiserver serves on a free loopback port with a certificate from a CA generated here,
// authenticates clients by that CA (the admin is O=system:masters) and by ServiceAccount
// tokens signed with a key generated here, authorizes with Node and RBAC, and uses
// --service-cluster-ip-range=10.96.0.0/16.
func Start(t T, opts ...Option) *Cluster {
	t.Helper()
	o := options{startTimeout: 2 * time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	apiserverBin, etcdBin := Bin(t, "kube-apiserver"), Bin(t, "etcd")
	Bin(t, "kubectl") // fail early: ApplyKustomize and Kubectl need it

	logDir := LogDir(t) // first, so that it is cleaned up after the processes stop
	dir := t.TempDir()
	c := &Cluster{Dir: dir, BinDir: BinDir()}

	// etcd, on two free loopback ports, in a data directory of its own.
	clientPort, peerPort := FreePort(t), FreePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.Etcd = StartProcess(t, "etcd", etcdBin, []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true", // a test cluster: speed over durability
		"--log-level=warn",
	}, nil)
	waitReady(t, c.Etcd, o.startTimeout, http.DefaultClient, etcdURL+"/health")

	// Certificates and keys.
	ca, err := newCA("hcloud-e2e-ca")
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	serving, err := newServingCert(ca, "kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	admin, err := newClientCert(ca, "e2e-admin", []string{"system:masters"})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	saKey, err := newSigningKeyPEM()
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	// The front proxy (aggregation layer) of a kubeadm cluster: without it, the
	// extension-apiserver-authentication ConfigMap has no requestheader CA, and every component
	// with delegated authentication (the CCM's secure port) logs errors about it.
	frontProxyCA, err := newCA("hcloud-e2e-front-proxy-ca")
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	frontProxy, err := newClientCert(frontProxyCA, "front-proxy-client", nil)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	files := map[string][]byte{
		filepath.Join(dir, "ca.crt"):                 ca.certPEM,
		filepath.Join(dir, "serving.crt"):            serving.certPEM,
		filepath.Join(dir, "serving.key"):            serving.keyPEM,
		filepath.Join(dir, "sa.key"):                 saKey,
		filepath.Join(dir, "front-proxy-ca.crt"):     frontProxyCA.certPEM,
		filepath.Join(dir, "front-proxy-client.crt"): frontProxy.certPEM,
		filepath.Join(dir, "front-proxy-client.key"): frontProxy.keyPEM,
	}
	if err := writeFiles(files); err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	c.caPEM = ca.certPEM

	// kube-apiserver.
	port := FreePort(t)
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--client-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + filepath.Join(dir, "front-proxy-client.crt"),
		"--proxy-client-key-file=" + filepath.Join(dir, "front-proxy-client.key"),
		// No kubelet or kube-controller-manager runs, and the "kubernetes" Service must not
		// point at a loopback address (rejected by Endpoints validation, logged forever).
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	c.APIServer = StartProcess(t, "kube-apiserver", apiserverBin, append(args, o.apiserverArgs...), nil)

	c.admin = &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   ca.certPEM,
			CertData: admin.certPEM,
			KeyData:  admin.keyPEM,
		},
		QPS:   100,
		Burst: 200,
	}
	tlsCert, err := tls.X509KeyPair(admin.certPEM, admin.keyPEM)
	if err != nil {
		t.Fatalf("start cluster: load admin certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	httpClient := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{tlsCert}}},
	}
	waitReady(t, c.APIServer, o.startTimeout, httpClient, c.Host+"/readyz")

	c.client, err = kubernetes.NewForConfig(c.admin)
	if err != nil {
		t.Fatalf("start cluster: admin client: %v", err)
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Host, c.caPEM, "e2e-admin", authInfo{certPEM: admin.certPEM, keyPEM: admin.keyPEM}); err != nil {
		t.Fatalf("start cluster: %v", err)
	}

	// The bootstrap objects come from post-start hooks and controllers that may finish after
	// /readyz: wait for the ones the CCM and its RBAC rely on.
	ctx := context.Background()
	WaitFor(t, o.startTimeout, func() (bool, error) {
		if _, err := c.client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("namespace kube-system: %w", err)
		}
		if _, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("configmap kube-system/extension-apiserver-authentication: %w", err)
		}
		if _, err := c.client.RbacV1().Roles("kube-system").Get(ctx, "extension-apiserver-authentication-reader", metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("role kube-system/extension-apiserver-authentication-reader: %w", err)
		}
		return true, nil
	})
	t.Logf("cluster up: apiserver %s, etcd %s, logs in %s", c.Host, etcdURL, logDir)
	return c
}

// Client returns a client of the cluster admin (group system:masters).
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// AdminConfig returns a copy of the admin's rest.Config.
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// CAData is the PEM of the CA that signed the apiserver's serving certificate.
func (c *Cluster) CAData() []byte { return c.caPEM }

// waitReady polls url until it answers 200, failing the test when p exits or the timeout passes.
func waitReady(t T, p *Process, timeout time.Duration, client *http.Client, url string) {
	t.Helper()
	WaitFor(t, timeout, func() (bool, error) {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s exited while starting (%v); last lines of its log:\n%s", p.Name, err, p.Tail(logTailLines))
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, fmt.Errorf("GET %s: %w", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return true, nil
	})
}
