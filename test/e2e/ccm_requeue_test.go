//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// requeueWithin is how soon a denied Service must get its address once the policy input allows
// it. The service controller's backoff after the third failure is 20 s (5 s, 10 s, 20 s, … up
// to 5 min), so only an immediate retry meets it.
const requeueWithin = 8 * time.Second

// TestCCMRequeuesDeniedServices proves that a denied Service is retried at once when the policy
// input changes, not after the service controller's backoff:
//
//   - shop/web is denied (public exposure in an unlabelled namespace); after three failed syncs
//     the namespace is labelled hcloud-ccm/public=true and the Service gets its address within
//     requeueWithin;
//   - blog/web is denied the same way; after three failed syncs the policy ConfigMap's data is
//     changed to make blog a public namespace, and the Service gets its address within
//     requeueWithin.
//
// Both run under the RBAC of deploy/ (startCCM fails on any refused request): the retry marker
// goes through services/status.
func TestCCMRequeuesDeniedServices(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}})
	waitInitialised(t, c, ccm, "worker-1", id)

	ctx := context.Background()
	for _, ns := range []string{"shop", "blog"} {
		if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
		createService(t, c, loadBalancerService(ns, "web"))
	}
	for _, ns := range []string{"shop", "blog"} {
		waitFailedSyncs(t, ccm, ns+"/web", 3)
	}
	if n := len(emu.LoadBalancers()); n != 0 {
		t.Fatalf("%d load balancers while both Services are denied, want 0", n)
	}

	start := time.Now()
	c.Kubectl(t, "label", "namespace", "shop", "hcloud-ccm/public=true")
	waitAddressWithin(t, c, ccm, "shop", "web", start)
	if svc := getService(t, c, "blog", "web"); len(svc.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("blog/web got an address from shop's label: %v", svc.Status.LoadBalancer.Ingress)
	}

	start = time.Now()
	applyPolicyData(t, c, ccm, func(config map[string]any) {
		config["public_namespaces"] = []string{"default", "blog"}
	})
	waitAddressWithin(t, c, ccm, "blog", "web", start)

	if n := len(emu.LoadBalancers()); n != 2 {
		t.Errorf("%d load balancers, want 2 (one per Service)", n)
	}
	if !strings.Contains(ccm.Logs(), "Retrying a denied Service now") {
		t.Errorf("%s did not log the retries", ccm.Name)
	}
}

// waitFailedSyncs waits until the service controller has failed to sync key n times (its log).
func waitFailedSyncs(t *testing.T, ccm *harness.Process, key string, n int) {
	t.Helper()
	line := "error processing service " + key + " (retrying with exponential backoff)"
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		got := strings.Count(ccm.Logs(), line)
		return got >= n, fmt.Errorf("%d failed syncs of %s logged, want %d", got, key, n)
	})
}

// waitAddressWithin waits until namespace/name has an ingress address and fails if that took
// longer than requeueWithin since start. The Service must carry the retry annotation.
func waitAddressWithin(t *testing.T, c *harness.Cluster, ccm *harness.Process, namespace, name string, start time.Time) {
	t.Helper()
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		svc := getService(t, c, namespace, name)
		return len(svc.Status.LoadBalancer.Ingress) > 0, fmt.Errorf("%s/%s has no address yet", namespace, name)
	})
	took := time.Since(start)
	t.Logf("%s/%s got its address %.1f s after the policy input changed", namespace, name, took.Seconds())
	if took > requeueWithin {
		t.Errorf("%s/%s got its address after %s, want within %s (it waited for the service controller's backoff)",
			namespace, name, took.Round(100*time.Millisecond), requeueWithin)
	}
	svc := getService(t, c, namespace, name)
	if _, ok := svc.Annotations[requeue.Annotation]; !ok {
		t.Errorf("%s/%s has no %s annotation: keys %v", namespace, name, requeue.Annotation, slices.Sorted(maps.Keys(svc.Annotations)))
	}
}
