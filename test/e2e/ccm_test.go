//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// ccmBuild is the CCM binary built once for the package's tests.
var ccmBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the CCM binary built by ccmBinary.
func TestMain(m *testing.M) {
	code := m.Run()
	if ccmBuild.dir != "" {
		os.RemoveAll(ccmBuild.dir)
	}
	os.Exit(code)
}

// ccmBinary returns the CCM binary under test: $CCM_BIN if set (the Makefile passes the one it
// built), otherwise a `go build` of ./cmd/hcloud-policy-ccm, made once per test binary.
func ccmBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CCM_BIN"); bin != "" {
		return bin
	}
	ccmBuild.once.Do(func() {
		ccmBuild.dir, ccmBuild.err = os.MkdirTemp("", "hcloud-e2e-ccm-")
		if ccmBuild.err != nil {
			return
		}
		ccmBuild.path = filepath.Join(ccmBuild.dir, "hcloud-policy-ccm")
		cmd := exec.Command("go", "build", "-trimpath", "-o", ccmBuild.path, "../../cmd/hcloud-policy-ccm") // as the Makefile builds it
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			ccmBuild.err = fmt.Errorf("go build ./cmd/hcloud-policy-ccm: %w\n%s", err, out)
		}
	})
	if ccmBuild.err != nil {
		t.Fatalf("build the CCM: %v", ccmBuild.err)
	}
	return ccmBuild.path
}

// enforce is the flag that tests asserting a denial append to the Deployment's args: deploy/ and
// the chart ship the policies in dry run (swap-safe), and the later flag wins.
const enforce = "--policy-mode=enforce"

// ccmRun says how to run the CCM out of cluster.
type ccmRun struct {
	// deploy is the kustomization whose Deployment gives the container args (default deploy/).
	deploy string
	// deployment, if set, gives the container args instead of deploy (the Helm chart's).
	deployment *appsv1.Deployment
	// args are appended to the command line; env ("KEY=value") to the environment.
	args, env []string
	// forbidden names the resources the test takes away from the CCM's RBAC on purpose (e.g.
	// "namespaces"): refusals about them are expected, any other refusal still fails the test.
	forbidden []string
}

// startCCM runs the CCM out of cluster as the ServiceAccount of deploy/ against the cluster and
// the emulator at endpoint, and returns the process and its secure port.
//
// The command line is the container args of the Deployment that `kubectl kustomize run.deploy`
// renders (so the tests prove that the shipped flags work: leader election on the Lease in
// kube-system, the policy ConfigMap, ...), plus what running outside a pod needs: the
// ServiceAccount's kubeconfig for the API and for delegated authn/authz, a free secure port on
// loopback, and the emulator's endpoint and token in place of the Secret. The test fails if the
// apiserver refused any of the CCM's requests.
func startCCM(t *testing.T, c *harness.Cluster, name, endpoint, token string, run ccmRun) (*harness.Process, int) {
	t.Helper()
	if run.deploy == "" {
		run.deploy = deployDir
	}
	d := run.deployment
	if d == nil {
		d = render(t, run.deploy).deployment
	}
	if d == nil {
		t.Fatalf("kubectl kustomize %s renders no Deployment", run.deploy)
	}
	kubeconfig := c.ServiceAccountKubeconfig(t, ccmNamespace, ccmServiceAccount)
	port := harness.FreePort(t)
	args := append(slices.Clone(d.Spec.Template.Spec.Containers[0].Args),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--secure-port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--v=2",
	)
	env := []string{
		"HCLOUD_TOKEN=" + token,
		"HCLOUD_ENDPOINT=" + endpoint,
		"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
		"HCLOUD_METRICS_ADDRESS=127.0.0.1:" + strconv.Itoa(harness.FreePort(t)),
	}
	p := harness.StartProcess(t, name, ccmBinary(t), append(args, run.args...), append(env, run.env...))
	// The RBAC of deploy/ must be enough for everything the CCM does: any "forbidden" reply from
	// the apiserver in its log fails the test.
	t.Cleanup(func() {
		for _, line := range strings.Split(p.Logs(), "\n") {
			if strings.Contains(line, "is forbidden") && !slices.ContainsFunc(run.forbidden, func(r string) bool {
				return strings.Contains(line, `"`+r+`"`) || strings.Contains(line, r+" is forbidden")
			}) {
				t.Errorf("%s was refused by the apiserver (RBAC of deploy/ is missing a rule):\n%s", name, line)
			}
		}
	})
	return p, port
}

// TestCCMInitialisesNode runs the CCM binary as its ServiceAccount (RBAC from deploy/) against a
// real kube-apiserver and the emulator, and checks that a node registered by a kubelet with
// --cloud-provider=external gets initialised: providerID hcloud://<id>, the uninitialized
// taint removed; and that the CCM took the leader Lease and serves /healthz.
func TestCCMInitialisesNode(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "worker-1", Type: "cx22", Location: "fsn1"})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")

	ccm, port := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{})

	node := waitInitialised(t, c, ccm, "worker-1", id)
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != "cx22" {
		t.Errorf("label %s = %q, want cx22", corev1.LabelInstanceTypeStable, got)
	}

	lease, err := c.Client().CoordinationV1().Leases(ccmNamespace).Get(context.Background(), "cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader-election Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease %s has no holder", lease.Name)
	}

	// The probe of deploy/deployment.yaml: HTTPS GET /healthz on the secure port, no credentials.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed in-memory certificate, as in the pod
	}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s, want 200 OK", resp.Status)
	}
}

// TestCCMLeaderFailover runs two CCMs with leader election, kills the leader with SIGKILL (no
// graceful release of the Lease, as in a node crash) and checks that the other one takes over
// and initialises a node registered after the failover.
func TestCCMLeaderFailover(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	var ids []int64
	for _, name := range []string{"worker-1", "worker-2"} {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: name})
		if err != nil {
			t.Fatalf("add server %s: %v", name, err)
		}
		ids = append(ids, id)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	a, _ := startCCM(t, c, "ccm-a", endpoint, emu.Token(), ccmRun{args: fastElection})
	b, _ := startCCM(t, c, "ccm-b", endpoint, emu.Token(), ccmRun{args: fastElection})
	leader, standby := electedLeader(t, a, b)
	waitInitialised(t, c, leader, "worker-1", ids[0])
	if strings.Contains(standby.Logs(), acquired) {
		t.Fatalf("both %s and %s acquired the lease", leader.Name, standby.Name)
	}

	leader.Kill()
	t.Logf("killed the leader %s; waiting for %s to take over", leader.Name, standby.Name)
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		if exited, err := standby.Exited(); exited {
			t.Fatalf("%s exited (%v)", standby.Name, err)
		}
		return strings.Contains(standby.Logs(), acquired), fmt.Errorf("%s has not acquired the lease", standby.Name)
	})
	c.CreateNode(t, "worker-2", "10.244.2.0/24")
	waitInitialised(t, c, standby, "worker-2", ids[1])
}

// startOneWorker starts a cluster as deploy/ installs it, the emulator with one server worker-1
// and its Node, and the CCM with run, and waits until worker-1 is initialised: the set-up of the
// tests that follow one Service or policy at a time.
func startOneWorker(t *testing.T, run ccmRun) (*harness.Cluster, *hcloudemu.Emulator, *harness.Process) {
	t.Helper()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), run)
	waitInitialised(t, c, ccm, "worker-1", id)
	return c, emu, ccm
}

// waitInitialised waits until the CCM has initialised node name as server id: providerID set,
// uninitialized taint gone. It fails at once if ccm exits meanwhile.
func waitInitialised(t *testing.T, c *harness.Cluster, ccm *harness.Process, name string, id int64) *corev1.Node {
	t.Helper()
	return waitProviderID(t, c, ccm, name, fmt.Sprintf("hcloud://%d", id))
}

// waitProviderID waits until node name has providerID want and no uninitialized taint. It
// fails at once if ccm exits meanwhile.
func waitProviderID(t *testing.T, c *harness.Cluster, ccm *harness.Process, name, want string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		if exited, err := ccm.Exited(); exited {
			t.Fatalf("%s exited (%v) before node %s was initialised", ccm.Name, err, name)
		}
		var err error
		node, err = c.Client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == harness.TaintUninitialized })
		if node.Spec.ProviderID != want || tainted {
			return false, fmt.Errorf("node %s: providerID %q (want %q), taints %v", name, node.Spec.ProviderID, want, node.Spec.Taints)
		}
		return true, nil
	})
	return node
}

// oneWorker starts a cluster with deploy/ applied and the emulator with one server, worker-1,
// whose Node it creates with podCIDR (none if empty). It returns the cluster, the emulator, its
// endpoint and the server's ID: the set-up most CCM tests start from.
func oneWorker(t *testing.T, podCIDR string) (*harness.Cluster, *hcloudemu.Emulator, string, int64) {
	t.Helper()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "worker-1"})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", podCIDR)
	return c, emu, endpoint, id
}

// fastElection are the leader-election flags of the failover tests: a dead leader's Lease
// expires within seconds.
var fastElection = []string{
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=1s",
}

// acquired is what a CCM logs when it becomes the leader.
const acquired = "Successfully acquired lease"

// electedLeader waits up to a minute for a or b to acquire the Lease and returns the leader and
// the standby.
func electedLeader(t *testing.T, a, b *harness.Process) (leader, standby *harness.Process) {
	t.Helper()
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		switch {
		case strings.Contains(a.Logs(), acquired):
			leader, standby = a, b
		case strings.Contains(b.Logs(), acquired):
			leader, standby = b, a
		default:
			return false, fmt.Errorf("no CCM logged %q yet", acquired)
		}
		return true, nil
	})
	return leader, standby
}
