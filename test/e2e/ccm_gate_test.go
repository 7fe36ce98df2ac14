//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// loadBalancerService returns a Service of type LoadBalancer on port 80.
func loadBalancerService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// TestCCMPolicyGate runs the CCM with the policies of deploy/ (examples/policies, from the
// ConfigMap, as deployed): a public load balancer for a namespace that may not expose one is
// denied (Warning event PolicyDenied on the Service, no load balancer and no mutating request
// in the cloud), and the same Service in an allowed namespace gets its load balancer.
func TestCCMPolicyGate(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{args: []string{enforce}, env: []string{
		"HCLOUD_LOAD_BALANCERS_LOCATION=fsn1",
		"HCLOUD_LOAD_BALANCERS_TYPE=lb11",
	}})
	waitInitialised(t, c, ccm, "worker-1", id)
	emu.ResetRequests()

	ctx := context.Background()
	admin := c.Client()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	denied, err := admin.CoreV1().Services("shop").Create(ctx, loadBalancerService("shop", "web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service shop/web: %v", err)
	}
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		events, err := admin.CoreV1().Events("shop").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": denied.Name, "reason": "PolicyDenied",
		}.String()})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, `namespace "shop" may not expose load balancers publicly`) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no PolicyDenied event about public exposure on shop/web yet (%d events)", len(events.Items))
	})
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after a deny, want 0: %v", n, emu.Counts())
	}
	if lbs := emu.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("%d load balancers after a deny, want 0", len(lbs))
	}

	// "default" is in data.config.public_namespaces: allowed.
	if _, err := admin.CoreV1().Services("default").Create(ctx, loadBalancerService("default", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service default/web: %v", err)
	}
	var ingress []corev1.LoadBalancerIngress
	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ingress = svc.Status.LoadBalancer.Ingress
		return len(ingress) > 0, fmt.Errorf("service default/web has no ingress yet")
	})
	lbs := emu.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers in the cloud, want 1", len(lbs))
	}
	if got, want := ingress[0].IP, lbs[0].PublicNet.IPv4.IP; got != want {
		t.Errorf("service ingress IP = %q, want the load balancer's %q", got, want)
	}
	if got := lbs[0].LoadBalancerType.Name; got != "lb11" {
		t.Errorf("load balancer type = %q, want lb11", got)
	}
}

// nodeLabelsPlugin returns the example node_labels plugin: $PLUGINS_DIR/node-labels.wasm.gz if
// PLUGINS_DIR is set (`make plugins` builds it), otherwise a fresh GOOS=wasip1 build.
func nodeLabelsPlugin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PLUGINS_DIR"); dir != "" {
		return filepath.Join(dir, "node-labels.wasm.gz")
	}
	out := filepath.Join(t.TempDir(), "node-labels.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "../../plugins/examples/node-labels")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the node-labels plugin: %v\n%s", err, b)
	}
	return out
}

// TestCCMNodeLabelsPlugin runs the CCM with the example node_labels plugin and checks that an
// initialised node carries the labels the plugin computed from its server.
func TestCCMNodeLabelsPlugin(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{
		Name: "worker-1", Type: "cax11",
		Labels: map[string]string{"node.hcloud.example/pool": "db", "ignored": "x"},
	})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{args: []string{"--plugin-node-labels=" + nodeLabelsPlugin(t)}})

	// The plugin's labels come with the initialisation (InstanceMetadata.AdditionalLabels).
	node := waitInitialised(t, c, ccm, "worker-1", id)
	got := map[string]string{}
	for k, v := range node.Labels {
		if strings.HasPrefix(k, "node.hcloud.example/") {
			got[k] = v
		}
	}
	want := map[string]string{
		"node.hcloud.example/pool":          "db",
		"node.hcloud.example/server-family": "cax",
		"node.hcloud.example/cpu-arch":      "arm64",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plugin labels on worker-1 (-want +got):\n%s", diff)
	}
}
