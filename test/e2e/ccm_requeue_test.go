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
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// The upstream service controller retries a failed sync after backoffBase, doubled per failure
// (k8s.io/cloud-provider controllers/service: minRetryDelay, maxRetryDelay).
const (
	backoffBase = 5 * time.Second
	backoffMax  = 5 * time.Minute
)

// minBackoffLeft is how much of the service controller's backoff must be left when the test
// changes the policy input: less, and the test waits for the next failed sync first, so that a
// retry by backoff can never pass for the immediate one.
const minBackoffLeft = 10 * time.Second

// TestCCMRequeuesDeniedServices proves that a denied Service is retried at once when the policy
// input changes, not after the service controller's backoff:
//
//   - shop/web is denied (public exposure in an unlabelled namespace); after three failed syncs
//     the namespace is labelled hcloud-ccm/public=true and the Service gets its address before
//     the service controller's backoff would have retried it (nextRetry);
//   - blog/web is denied the same way; after three failed syncs the policy ConfigMap's data is
//     changed to make blog a public namespace, and the Service gets its address before its
//     backoff ends.
//
// The deadline is derived from the backoff (the time of the last failed sync in the CCM's log
// plus 5 s doubled per failure), not a fixed number of seconds, so a loaded machine does not
// fail the test (issue 33); at least minBackoffLeft of it is left when the input changes.
//
// Both run under the RBAC of deploy/ (startCCM fails on any refused request): the retry marker
// goes through services/status.
func TestCCMRequeuesDeniedServices(t *testing.T) {
	t.Parallel()
	c, emu, ccm := startOneWorker(t, ccmRun{env: lbEnv, args: []string{enforce}})

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

	due := backoffLeft(t, ccm, "shop/web")
	c.Kubectl(t, "label", "namespace", "shop", "hcloud-ccm/public=true")
	waitAddressBefore(t, c, ccm, "shop", "web", due)
	if svc := getService(t, c, "blog", "web"); len(svc.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("blog/web got an address from shop's label: %v", svc.Status.LoadBalancer.Ingress)
	}

	due = backoffLeft(t, ccm, "blog/web")
	applyPolicyData(t, c, ccm, func(config map[string]any) {
		config["public_namespaces"] = []string{"default", "blog"}
	})
	waitAddressBefore(t, c, ccm, "blog", "web", due)

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
	waitCCM(t, ccm, 2*time.Minute, func() (bool, error) {
		got := strings.Count(ccm.Logs(), failedSync(key))
		return got >= n, fmt.Errorf("%d failed syncs of %s logged, want %d", got, key, n)
	})
}

// failedSync is the log line of a failed sync of a Service (the upstream service controller's).
func failedSync(key string) string {
	return "error processing service " + key + " (retrying with exponential backoff)"
}

// nextRetry returns when the service controller retries key by backoff: the klog time of its
// last failed sync in the CCM's log plus backoffBase doubled per failure before it.
func nextRetry(t *testing.T, ccm *harness.Process, key string) time.Time {
	t.Helper()
	var last string
	n := 0
	for _, line := range strings.Split(ccm.Logs(), "\n") {
		if strings.Contains(line, failedSync(key)) {
			last, n = line, n+1
		}
	}
	if n == 0 {
		t.Fatalf("no failed sync of %s in the log of %s", key, ccm.Name)
	}
	// klog's header: Lmmdd hh:mm:ss.uuuuuu, local time, no year.
	if len(last) < len("E0102 15:04:05.000000") {
		t.Fatalf("no klog header in %q", last)
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", last[1:len("E0102 15:04:05.000000")], time.Local)
	if err != nil {
		t.Fatalf("klog time of %q: %v", last, err)
	}
	now := time.Now()
	at = at.AddDate(now.Year(), 0, 0)
	if at.After(now.Add(time.Hour)) { // logged last year (a run over New Year)
		at = at.AddDate(-1, 0, 0)
	}
	delay := backoffBase << (n - 1)
	if n > 7 || delay > backoffMax {
		delay = backoffMax
	}
	return at.Add(delay)
}

// backoffLeft returns when the service controller retries key by backoff, waiting for its next
// failed sync first when less than minBackoffLeft of the backoff is left.
func backoffLeft(t *testing.T, ccm *harness.Process, key string) time.Time {
	t.Helper()
	due := nextRetry(t, ccm, key)
	if time.Until(due) >= minBackoffLeft {
		return due
	}
	n := strings.Count(ccm.Logs(), failedSync(key))
	waitFailedSyncs(t, ccm, key, n+1)
	return nextRetry(t, ccm, key)
}

// waitAddressBefore waits until namespace/name has an ingress address and fails if it came after
// due, when the service controller's backoff would have retried it anyway. The Service must
// carry the retry annotation.
func waitAddressBefore(t *testing.T, c *harness.Cluster, ccm *harness.Process, namespace, name string, due time.Time) {
	t.Helper()
	left := time.Until(due)
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		svc := getService(t, c, namespace, name)
		return len(svc.Status.LoadBalancer.Ingress) > 0, fmt.Errorf("%s/%s has no address yet", namespace, name)
	})
	t.Logf("%s/%s got its address with %.1f s of the service controller's backoff (%.1f s) left", namespace, name, time.Until(due).Seconds(), left.Seconds())
	if now := time.Now(); now.After(due) {
		t.Errorf("%s/%s got its address %s after the service controller's backoff ended: it was not retried at once",
			namespace, name, now.Sub(due).Round(100*time.Millisecond))
	}
	svc := getService(t, c, namespace, name)
	if _, ok := svc.Annotations[requeue.Annotation]; !ok {
		t.Errorf("%s/%s has no %s annotation: keys %v", namespace, name, requeue.Annotation, slices.Sorted(maps.Keys(svc.Annotations)))
	}
}
