//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestCCMFailedActionBurstBackoff (issue 34 §1): every add_target action fails for burstFault
// while 2 nodes join under 4 load balancers, and one node's exclusion label flips every 2 s (each
// flip is a node sync: an UpdateLoadBalancer of every Service, whose add_target would fail
// again). The retries of the failed updates follow ccm/requeue's per-Service backoff (2 s doubled
// per failure, at most 16 s), and nothing is sent for a Service while its retry is scheduled, so
// the burst costs a bounded number of add_target requests per node and load balancer, whatever
// the number of failures and node syncs, and every target is in place within one retry interval
// (16 s) of the fault's end, plus one sync. Before, each failure was retried at once (85
// add_target in the 20 s) and then by the service controller's backoff (5 s doubled, up to 5
// minutes): the targets were not in place 30 s after the fault's end.
func TestCCMFailedActionBurstBackoff(t *testing.T) {
	t.Parallel()
	// maxAttempts: the syncs of a Service are the first failed update and the retries 2, 4 and
	// 8 s after each failure (due about 2, 6 and 14 s after the first: 1 + ⌊log₂(20/2 + 1)⌋ = 4),
	// plus one for a node sync that starts before the first failure is seen.
	burstCase(t, burst{lbs: 4, fault: 20 * time.Second, maxAttempts: 1 + 3 + 1})
}

// TestCCMFailedActionBurstBackoffWithDrift (issue 40 §5): the same at the probe's size, 36
// load balancers and a 90 s fault, with drift repair every 20 s. The drift checks see the
// missing targets as drift, and leave each Service to its scheduled retry; the bound holds:
// 1 + ⌊log₂(30/2 + 1)⌋ + ⌊(90 − 30)/16⌋ = 8 syncs per Service, plus one node sync, and every
// target in place within 16 s of the fault's end plus one sync (measured before the fix: 32 s,
// with 188 drift retries during the fault).
func TestCCMFailedActionBurstBackoffWithDrift(t *testing.T) {
	t.Parallel()
	burstCase(t, burst{lbs: 36, fault: 90 * time.Second, maxAttempts: 8 + 1, args: []string{"--load-balancer-drift-interval=20s"}})
}

// burst is one case of the failed-action burst: lbs Services, add_target failing for fault,
// at most maxAttempts add_target requests per node and load balancer, the CCM run with args.
type burst struct {
	lbs         int
	fault       time.Duration
	maxAttempts int
	args        []string
}

// burstCase runs b (see TestCCMFailedActionBurstBackoff).
func burstCase(t *testing.T, b burst) {
	lbs, burstFault, maxAttempts := b.lbs, b.fault, b.maxAttempts
	const (
		flipEvery = 2 * time.Second
		// retryCap is requeue.ActionRetryMax; inPlace adds the time one sync and its action
		// polls take on a loaded machine.
		retryCap = 16 * time.Second
		inPlace  = retryCap + 14*time.Second
	)
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	id3 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-3"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: b.args})
	waitInitialised(t, c, ccm, "worker-1", id1)

	wantTargets := func(ids ...int64) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			if got := targetServers(lb); !slices.Equal(got, ids) {
				return fmt.Errorf("target servers %v, want %v", got, ids)
			}
			return nil
		}
	}
	var svcs []*corev1.Service
	for i := range lbs {
		svcs = append(svcs, createService(t, c, loadBalancerService("default", fmt.Sprintf("burst-%d", i))))
	}
	for _, svc := range svcs {
		waitLB(t, ccm, emu, svc.UID, 2*time.Minute, wantTargets(id1))
	}

	const addTarget = "POST /v1/load_balancers/{id}/actions/add_target"
	var flips int
	emu.ResetRequests()
	emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true})
	start := time.Now()
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	createNodeLive(t, c, "worker-3", "10.244.3.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)
	waitInitialised(t, c, ccm, "worker-3", id3)
	// Each flip of worker-3's exclusion label is a node sync: an UpdateLoadBalancer of every
	// Service, whose detached add_target fails again. Without the backoff each such failure was
	// retried at once; with it the flips send nothing while the retry is scheduled.
	for i := 0; time.Until(start.Add(burstFault)) > flipEvery; i++ {
		time.Sleep(flipEvery)
		value := "null"
		if i%2 == 0 {
			value = `"true"`
		}
		patch := []byte(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":` + value + `}}}`)
		if _, err := c.Client().CoreV1().Nodes().Patch(t.Context(), "worker-3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("flip the exclusion label of worker-3: %v", err)
		}
		flips = i + 1
	}
	if flips%2 == 1 {
		patch := []byte(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":null}}}`)
		if _, err := c.Client().CoreV1().Nodes().Patch(t.Context(), "worker-3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("include worker-3 again: %v", err)
		}
	}
	time.Sleep(time.Until(start.Add(burstFault)))
	emu.ClearFaults()
	cleared := time.Now()
	during := emu.Counts()
	t.Logf("during the %v burst (%d flips of worker-3's exclusion): %d add_target, %d GET /load_balancers, %d mutating, %d requests in all",
		burstFault, flips, during[addTarget], during["GET /v1/load_balancers"], emu.MutatingRequests(), len(emu.Requests()))

	for _, svc := range svcs {
		waitLB(t, ccm, emu, svc.UID, max(inPlace-time.Since(cleared), time.Second), wantTargets(id1, id2, id3))
	}
	t.Logf("every target in place %v after the fault's end (bound %v); %d drift syncs in the CCM's log", time.Since(cleared).Round(100*time.Millisecond), inPlace,
		strings.Count(ccm.Logs(), "Load balancer drift found: syncing the Service now"))

	if bound := lbs * 2 * maxAttempts; during[addTarget] > bound {
		t.Errorf("%d add_target requests during the %v burst, want at most %d (%d per node and load balancer: the backoff, not the number of failures, bounds them)",
			during[addTarget], burstFault, bound, maxAttempts)
	}
	if logs := ccm.Logs(); !strings.Contains(logs, "Detached load balancer update failed") {
		t.Error("the CCM did not log the failed detached updates")
	}
}
