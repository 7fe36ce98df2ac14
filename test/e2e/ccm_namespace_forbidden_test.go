//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMForbiddenNamespaceReadDenies: with RBAC that does not let the CCM read namespaces,
// the policy input cannot carry the namespace's labels. The decision is then an evaluation
// error under --policy-failure-mode (closed in deploy/), so in enforce mode a Service the policy
// would allow is denied with a message naming the namespace, instead of being decided with
// namespace_labels null (which would skip every rule keyed on a namespace label). In deploy/'s
// dry run the same error never blocks (TestCCMDryRunEvaluationErrorDoesNotBlock).
func TestCCMForbiddenNamespaceReadDenies(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	ctx := context.Background()
	admin := c.Client()
	role, err := admin.RbacV1().ClusterRoles().Get(ctx, "system:hcloud-policy-ccm", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ClusterRole: %v", err)
	}
	before := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "namespaces") })
	if len(role.Rules) != before-1 {
		t.Fatalf("ClusterRole system:hcloud-policy-ccm: %d rules name namespaces, want 1", before-len(role.Rules))
	}
	if _, err := admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update ClusterRole: %v", err)
	}

	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}, forbidden: []string{"namespaces"}})
	waitInitialised(t, c, ccm, "worker-1", id)
	emu.ResetRequests()

	// "default" may expose a public load balancer (examples/policies data.json): with its
	// labels readable this Service would be allowed (TestCCMPolicyGate).
	createService(t, c, loadBalancerService("default", "web"))
	waitEvent(t, c, ccm, "default", "web", corev1.EventTypeWarning, "PolicyDenied", `cannot read the labels of namespace "default"`)
	time.Sleep(2 * time.Second) // a retry or two
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests without namespace labels, want 0: %v", n, emu.Counts())
	}
	if n := len(emu.LoadBalancers()); n != 0 {
		t.Errorf("%d load balancers, want 0", n)
	}
}
