//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMGroupDeniedMemberRetriesCostNothing (issue 29 item 4): a member of a load balancer
// group that the example policies deny (another namespace than the group's home) is retried by
// the service controller with backoff (5 s doubled up to 5 min); over its next 5 retries (20 s
// to 160 s apart: 5 minutes 10 seconds), nothing changes, and they cost no load balancer request, no decision (no decision
// log line, so no new decision ID) and no new Event object: the denial cache answers them as it
// answers a Service of its own. The drift check is off, so that any load balancer request is a
// retry's.
func TestCCMGroupDeniedMemberRetriesCostNothing(t *testing.T) {
	t.Parallel()
	const retries = 5
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce, "--load-balancer-drift-interval=0"}})
	waitInitialised(t, c, ccm, "worker-1", id)
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "shop", Labels: map[string]string{"hcloud-ccm/public": "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	web := createService(t, c, groupService("default", "web", "web", 80))
	lb := waitGroupLB(t, ccm, emu, "web", hasListeners(wantGroupListeners(web)))
	waitServedBy(t, c, ccm, lb, web)
	createService(t, c, groupService("shop", "api", "web", 443))
	waitEvent(t, c, ccm, "shop", "api", corev1.EventTypeWarning, "PolicyDenied", `Service shop/api may not join load balancer group "web"`)
	// The first retry may still decide (its digest names the group's state after the leader's
	// sync); from the second on, nothing changes.
	waitFailedSyncs(t, ccm, "shop/api", 2)

	emu.ResetRequests()
	logs := ccm.Logs()
	syncsBefore, decisionsBefore := strings.Count(logs, failedSync("shop/api")), strings.Count(logs, `"decision_id"`)
	eventsBefore := serviceEvents(t, c, "shop", "api")
	waitCCM(t, ccm, 8*time.Minute, func() (bool, error) {
		got := strings.Count(ccm.Logs(), failedSync("shop/api")) - syncsBefore
		return got >= retries, fmt.Errorf("%d more failed syncs of shop/api, want %d", got, retries)
	})
	logs = ccm.Logs()
	eventsAfter := serviceEvents(t, c, "shop", "api")
	lbReqs, decisions := lbRequests(emu.Counts()), strings.Count(logs, `"decision_id"`)-decisionsBefore
	t.Logf("%d retries of the denied member: %d load balancer requests, %d decisions, Events %d before and %d after (%v)",
		strings.Count(logs, failedSync("shop/api"))-syncsBefore, lbReqs, decisions, len(eventsBefore), len(eventsAfter), emu.Counts())
	if lbReqs != 0 {
		t.Errorf("the unchanged denied member's retries cost %d load balancer requests, want 0: %v", lbReqs, emu.Counts())
	}
	if decisions != 0 {
		t.Errorf("the unchanged denied member's retries made %d decisions (decision log lines), want 0", decisions)
	}
	for name, reason := range eventsAfter {
		if _, ok := eventsBefore[name]; !ok {
			t.Errorf("new Event %s (%s) on shop/api during its unchanged retries", name, reason)
		}
	}
	if emu.MutatingRequests() != 0 {
		t.Errorf("mutating requests while nothing changed: %v", emu.Counts())
	}
}

// serviceEvents returns the reason of each Event object of the Service namespace/name, by the
// Event's name (an event the recorder repeats is the same object with a higher count).
func serviceEvents(t *testing.T, c *harness.Cluster, namespace, name string) map[string]string {
	t.Helper()
	list, err := c.Client().CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "involvedObject.kind": "Service",
	}.String()})
	if err != nil {
		t.Fatalf("list events of %s/%s: %v", namespace, name, err)
	}
	out := map[string]string{}
	for _, e := range list.Items {
		out[e.Name] = e.Reason
	}
	return out
}
