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

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// failingRule fails at run time for every decision in this cluster ("kubernetes" has 10
// characters: a division by zero), and never for the shipped sample inputs (cluster "demo"),
// which every revision is vetted against before it is put in force.
const failingRule = `package ccm

deny contains "never reached" if {
	input.cluster.name == "kubernetes"
	10 / (count(input.cluster.name) - 10) > 1
}
`

// TestCCMDryRunEvaluationErrorDoesNotBlock runs the CCM as shipped (--policy-mode=dryrun,
// --policy-failure-mode=closed) and loads a rule that fails at run time for every decision.
// Dry run must never block (issue 34): a new node becomes a target of every load balancer (the
// detached path of UpdateLoadBalancer) and a new Service still gets its load balancer (the
// synchronous path, EnsureLoadBalancer), each failure reported as a Warning event
// PolicyDryRunDenied naming it, never as PolicyDenied.
func TestCCMDryRunEvaluationErrorDoesNotBlock(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitInitialised(t, c, ccm, "worker-1", id1)
	for _, want := range []string{`mode="dryrun"`, `failureMode="closed"`} {
		if !strings.Contains(ccm.Logs(), want) {
			t.Fatalf("%s did not log %s: the shipped policy flags are not in force", ccm.Name, want)
		}
	}
	targets := func(ids ...int64) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			if got := targetServers(lb); !slices.Equal(got, ids) {
				return fmt.Errorf("target servers %v, want %v", got, ids)
			}
			return nil
		}
	}

	const ns = "default"
	web := createService(t, c, loadBalancerService(ns, "web"))
	api := createService(t, c, loadBalancerService(ns, "api"))
	for _, svc := range []*corev1.Service{web, api} {
		waitLB(t, ccm, emu, svc.UID, time.Minute, targets(id1))
	}

	updatePolicies(t, c, ccm, func(data map[string]string) { data["failing.rego"] = failingRule })
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)
	for _, svc := range []*corev1.Service{web, api} {
		waitLB(t, ccm, emu, svc.UID, time.Minute, targets(id1, id2))
	}
	waitEvent(t, c, ccm, ns, web.Name, corev1.EventTypeWarning, "PolicyDryRunDenied", "policy evaluation failed")

	shop := createService(t, c, loadBalancerService(ns, "shop"))
	waitLB(t, ccm, emu, shop.UID, time.Minute, targets(id1, id2))
	waitEvent(t, c, ccm, ns, shop.Name, corev1.EventTypeWarning, "PolicyDryRunDenied", "policy evaluation failed")
	for _, svc := range []*corev1.Service{web, api, shop} {
		if evs, err := events(c, ns, svc.Name, "PolicyDenied"); err != nil || len(evs) != 0 {
			t.Errorf("%s/%s: %d PolicyDenied events in dry run (%v), want none", ns, svc.Name, len(evs), err)
		}
	}
}
