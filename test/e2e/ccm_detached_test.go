//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// retryAnnotation is ccm/requeue's Annotation: it makes the service controller sync a Service.
const retryAnnotation = "service.hcloud-policy-ccm.io/policy-retry"

// TestCCMDetachedUpdateFailureRetried: a node joins and the service controller's
// UpdateLoadBalancer returns once the API accepted its add_target (issue 24: the actions of a
// round are polled together). The action then ends in error. The CCM must notice it, mark the
// Service for retry (the annotation ccm/requeue sets) and add the target on the retry; the
// service controller would not call again by itself, since its call succeeded.
func TestCCMDetachedUpdateFailureRetried(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitInitialised(t, c, ccm, "worker-1", id1)

	const ns, name = "default", "web"
	svc := createService(t, c, loadBalancerService(ns, name))
	wantTargets := func(ids ...int64) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			if got := targetServers(lb); !slices.Equal(got, ids) {
				return fmt.Errorf("target servers %v, want %v", got, ids)
			}
			return nil
		}
	}
	waitLB(t, ccm, emu, svc.UID, time.Minute, wantTargets(id1))

	const addTarget = "POST /v1/load_balancers/{id}/actions/add_target"
	before := emu.Counts()[addTarget]
	emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1})
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)
	waitLB(t, ccm, emu, svc.UID, time.Minute, wantTargets(id1, id2))

	if n := emu.Counts()[addTarget] - before; n < 2 {
		t.Errorf("%d add_target requests after the node joined, want at least 2 (the failed one and the retry)", n)
	}
	if v := getService(t, c, ns, name).Annotations[retryAnnotation]; !strings.HasPrefix(v, "failed load balancer update") {
		t.Errorf("annotation %s = %q, want the retry of a failed update", retryAnnotation, v)
	}
	if logs := ccm.Logs(); !strings.Contains(logs, "Detached load balancer update failed") {
		t.Error("the CCM did not log the failed detached update")
	}
}
