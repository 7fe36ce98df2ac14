//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCCMDeniedRetriesCostNoRequests: 50 Services that the policy of deploy/, enforced, denies
// (public load balancers in namespace shop) are retried by the upstream service controller with
// backoff; after the first try of each, the retries cost no load balancer request at all.
func TestCCMDeniedRetriesCostNoRequests(t *testing.T) {
	t.Parallel()
	const services = 50
	c, emu, ccm := startOneWorker(t, ccmRun{env: lbEnv, args: []string{enforce}})

	if _, err := c.Client().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	emu.ResetRequests()
	for i := range services {
		createService(t, c, loadBalancerService("shop", fmt.Sprintf("web-%d", i)))
	}
	for i := range services {
		waitFailedSyncs(t, ccm, fmt.Sprintf("shop/web-%d", i), 1)
	}
	first := lbRequests(emu.Counts())
	emu.ResetRequests()
	failedBefore := strings.Count(ccm.Logs(), "error processing service shop/web-")
	// Each Service is retried after 5 s and 10 s more: wait for two retries of each.
	for i := range services {
		waitFailedSyncs(t, ccm, fmt.Sprintf("shop/web-%d", i), 3)
	}
	retries := strings.Count(ccm.Logs(), "error processing service shop/web-") - failedBefore
	after := lbRequests(emu.Counts())
	t.Logf("%d denied Services: first tries %d load balancer requests; %d retries then cost %d (%v)", services, first, retries, after, emu.Counts())
	if retries < 2*services {
		t.Errorf("%d retries, want at least %d", retries, 2*services)
	}
	if after != 0 {
		t.Errorf("%d retries of unchanged denied Services cost %d load balancer requests, want 0: %v", retries, after, emu.Counts())
	}
	if emu.MutatingRequests() != 0 {
		t.Errorf("mutating requests for denied Services: %v", emu.Counts())
	}
}

// lbRequests counts the requests about load balancers (and their types and certificates).
func lbRequests(counts map[string]int) int {
	n := 0
	for route, c := range counts {
		if strings.Contains(route, "/v1/load_balancer") || strings.Contains(route, "/v1/certificates") {
			n += c
		}
	}
	return n
}
