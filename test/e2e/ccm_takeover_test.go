//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMNoLoadBalancerTakeover proves issue 10's first rule end to end: no Service can touch
// another Service's load balancer by naming it. The CCM runs with a naming plugin that gives
// every Service the same name (plugins/testdata/good.wasm: "wat-lb"):
//
//   - default/web gets the load balancer "wat-lb";
//   - attacker/web (its namespace may expose load balancers) is named "wat-lb" by the plugin,
//     attacker/api by the name annotation: each gets a Warning event LoadBalancerNameConflict
//     and no load balancer;
//   - both are deleted: they go, and default/web's load balancer is untouched throughout (same
//     ID, label, listeners, targets), with no mutating request on its behalf.
func TestCCMNoLoadBalancerTakeover(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	plugin, err := filepath.Abs("../../plugins/testdata/good.wasm")
	if err != nil {
		t.Fatal(err)
	}
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{"--plugin-load-balancer-name=" + plugin}})
	waitInitialised(t, c, ccm, "worker-1", id)

	owner := createService(t, c, loadBalancerService("default", "web"))
	before := waitLB(t, ccm, emu, owner.UID, time.Minute, func(lb schema.LoadBalancer) error {
		if lb.Name != "wat-lb" {
			return fmt.Errorf("name %q, want the plugin's wat-lb", lb.Name)
		}
		return nil
	})
	waitIngress(t, c, ccm, "default", "web")

	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "attacker", Labels: map[string]string{"hcloud-ccm/public": "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	emu.ResetRequests()
	byPlugin := loadBalancerService("attacker", "web")
	byPlugin.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: 443}}
	byAnnotation := loadBalancerService("attacker", "api")
	byAnnotation.Annotations = map[string]string{annotationPrefix + "name": "wat-lb"}
	for _, svc := range []*corev1.Service{byPlugin, byAnnotation} {
		createService(t, c, svc)
		waitEvent(t, c, ccm, svc.Namespace, svc.Name, corev1.EventTypeWarning, "LoadBalancerNameConflict", `load balancer name "wat-lb" is taken`)
	}
	for _, name := range []string{"web", "api"} {
		if err := c.Client().CoreV1().Services("attacker").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete attacker/%s: %v", name, err)
		}
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			_, err := c.Client().CoreV1().Services("attacker").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Errorf("attacker/%s not gone yet: %w", name, err)
		})
	}

	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests for the newcomers, want 0: %v", n, emu.Counts())
	}
	lbs := emu.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("load balancers %v, want only default/web's %d", lbNames(lbs), before.ID)
	}
	after := lbs[0]
	if after.ID != before.ID || after.Name != "wat-lb" || after.Labels[labelServiceUID] != string(owner.UID) {
		t.Errorf("owner's load balancer changed: %d %s %v, want %d wat-lb %s=%s", after.ID, after.Name, after.Labels, before.ID, labelServiceUID, owner.UID)
	}
	if got, want := listeners(after), listeners(before); !slices.Equal(got, want) {
		t.Errorf("owner's listeners %v, want %v", got, want)
	}
	if got, want := targetServers(after), targetServers(before); !slices.Equal(got, want) {
		t.Errorf("owner's targets %v, want %v", got, want)
	}
}
