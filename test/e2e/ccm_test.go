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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// ccmBinary returns the CCM binary under test: $CCM_BIN if set (the Makefile passes the one it
// built), otherwise a fresh `go build` of ./cmd/hcloud-policy-ccm into the test's temp dir.
func ccmBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CCM_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "hcloud-policy-ccm")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/hcloud-policy-ccm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the CCM: %v\n%s", err, out)
	}
	return bin
}

// startCCM runs the CCM out of cluster as the ServiceAccount of deploy/ against the cluster and
// the emulator at endpoint, with leader election on (the Lease in kube-system, as deployed) and
// the policy ConfigMap of deploy/. It returns the process and its secure port.
func startCCM(t *testing.T, c *harness.Cluster, name, endpoint, token string, extraArgs ...string) (*harness.Process, int) {
	t.Helper()
	kubeconfig := c.ServiceAccountKubeconfig(t, ccmNamespace, ccmServiceAccount)
	port := harness.FreePort(t)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cloud-provider=hcloud",
		"--allow-untagged-cloud",
		"--leader-elect=true",
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--webhook-secure-port=0",
		"--policy-configmap=" + ccmNamespace + "/" + policyConfigMap,
		"--policy-mode=enforce",
		"--v=2",
	}
	env := []string{
		"HCLOUD_TOKEN=" + token,
		"HCLOUD_ENDPOINT=" + endpoint,
		"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
		"HCLOUD_METRICS_ADDRESS=127.0.0.1:" + strconv.Itoa(harness.FreePort(t)),
	}
	return harness.StartProcess(t, name, ccmBinary(t), append(args, extraArgs...), env), port
}

// TestCCMInitialisesNode runs the CCM binary as its ServiceAccount (RBAC from deploy/) against a
// real kube-apiserver and the emulator, and checks that a node registered by a kubelet with
// --cloud-provider=external gets initialised: providerID hcloud://<id>, the uninitialized
// taint removed; and that the CCM took the leader Lease and serves /healthz.
func TestCCMInitialisesNode(t *testing.T) {
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "worker-1", Type: "cx22", Location: "fsn1"})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")

	ccm, port := startCCM(t, c, "ccm", endpoint, emu.Token())

	ctx := context.Background()
	wantProviderID := fmt.Sprintf("hcloud://%d", id)
	var node *corev1.Node
	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		if exited, err := ccm.Exited(); exited {
			t.Fatalf("the CCM exited (%v)", err)
		}
		node, err = c.Client().CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == harness.TaintUninitialized })
		if node.Spec.ProviderID != wantProviderID || tainted {
			return false, fmt.Errorf("node worker-1: providerID %q, taints %v", node.Spec.ProviderID, node.Spec.Taints)
		}
		return true, nil
	})
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != "cx22" {
		t.Errorf("label %s = %q, want cx22", corev1.LabelInstanceTypeStable, got)
	}

	lease, err := c.Client().CoordinationV1().Leases(ccmNamespace).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
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
