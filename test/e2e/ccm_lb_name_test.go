//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// lbNamePlugin returns the example load_balancer_name plugin: $PLUGINS_DIR/lb-name.wasm.gz if
// PLUGINS_DIR is set (`make plugins` builds it), otherwise a fresh GOOS=wasip1 build.
func lbNamePlugin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PLUGINS_DIR"); dir != "" {
		return filepath.Join(dir, "lb-name.wasm.gz")
	}
	out := filepath.Join(t.TempDir(), "lb-name.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "../../plugins/examples/lb-name")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the lb-name plugin: %v\n%s", err, b)
	}
	return out
}

// TestCCMLoadBalancerNamePlugin proves that load balancer identity is the service-uid label,
// never the name:
//
//   - a CCM with --plugin-load-balancer-name (the example lb-name plugin) names the load
//     balancer "<cluster>-<namespace>-<service>-<first 8 hex digits of sha256(uid)>", with the
//     default --cluster-name "kubernetes";
//   - that CCM stopped, the name annotation set, and a second CCM started without the plugin:
//     the same load balancer is renamed to the annotation's value; no load balancer is created
//     (no duplicate) and none is left behind (no orphan).
func TestCCMLoadBalancerNamePlugin(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	first, _ := startCCM(t, c, "ccm-plugin", endpoint, emu.Token(), ccmRun{
		env:  lbEnv,
		args: []string{"--plugin-load-balancer-name=" + lbNamePlugin(t)},
	})
	waitInitialised(t, c, first, "worker-1", id)

	const ns, name = "default", "web"
	svc := createService(t, c, loadBalancerService(ns, name))
	sum := sha256.Sum256([]byte(svc.UID))
	want := fmt.Sprintf("kubernetes-%s-%s-%s", ns, name, hex.EncodeToString(sum[:4]))
	lb := waitLB(t, first, emu, svc.UID, time.Minute, func(lb schema.LoadBalancer) error {
		if lb.Name != want {
			return fmt.Errorf("name %q, want the plugin's %q", lb.Name, want)
		}
		return nil
	})
	waitIngress(t, c, first, ns, name)
	first.Stop()
	// The upstream CCM does not release its Lease on SIGTERM: delete it, so that the second CCM
	// leads at once instead of after the lease duration.
	if err := c.Client().CoordinationV1().Leases(ccmNamespace).Delete(context.Background(), "cloud-controller-manager", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the leader Lease of the stopped CCM: %v", err)
	}

	// While no CCM runs: the annotation names the load balancer from now on.
	const renamed = "e2e-renamed-web"
	updateService(t, c, ns, name, func(s *corev1.Service) { s.Annotations[annotationPrefix+"name"] = renamed })
	emu.ResetRequests()
	second, _ := startCCM(t, c, "ccm-annotation", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitLB(t, second, emu, svc.UID, time.Minute, func(got schema.LoadBalancer) error {
		if got.ID != lb.ID {
			t.Fatalf("load balancer of %s/%s is %d, want the same %d", ns, name, got.ID, lb.ID)
		}
		if got.Name != renamed {
			return fmt.Errorf("name %q, want the annotation's %q", got.Name, renamed)
		}
		return nil
	})
	if lbs := emu.LoadBalancers(); len(lbs) != 1 {
		t.Errorf("load balancers %v, want only %d (no orphan, no duplicate)", lbNames(lbs), lb.ID)
	}
	if n := emu.Counts()["POST /v1/load_balancers"]; n != 0 {
		t.Errorf("%d load balancer creations by the second CCM, want 0: %v", n, emu.Counts())
	}
}
