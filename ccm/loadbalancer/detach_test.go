package loadbalancer_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// failureTracker is a DenialTracker that also records failed detached updates.
type failureTracker struct {
	mu     sync.Mutex
	failed []string
}

func (*failureTracker) Denied(*corev1.Service)  {}
func (*failureTracker) Settled(*corev1.Service) {}

func (f *failureTracker) ActionFailed(svc *corev1.Service, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, svc.Name+": "+err.Error())
}

func (f *failureTracker) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// TestUpdateLoadBalancer_detached: an Update's target change returns once the API accepted it;
// when its action then fails, the Service is retried (ActionFailureTracker) and its cached load
// balancer forgotten, so the next Update reads it and adds the target again. A tracker that is
// not an ActionFailureTracker still gets the cache forgotten.
func TestUpdateLoadBalancer_detached(t *testing.T) {
	tests := []struct {
		name        string
		tracker     bool
		wantRetried int
	}{
		{"the tracker retries the Service", true, 1},
		{"no tracker: the cache is forgotten all the same", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tracker := &failureTracker{}
			ev := newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) {
				if tc.tracker {
					o.DenialTracker = tracker
				}
			}))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1})
			if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatalf("Update whose action fails later = %v, want nil (the API accepted the request)", err)
			}
			if err := ev.exec.Settle(ctx, svc.UID); err != nil {
				t.Fatal(err)
			}
			if got := tracker.get(); len(got) != tc.wantRetried || (len(got) == 1 && !strings.Contains(got[0], "action_failed")) {
				t.Errorf("retried %v, want %d retry naming action_failed", got, tc.wantRetried)
			}
			if !hasEvent(ev.events(), "Warning UpdateLoadBalancerFailed") {
				t.Error("no Warning event UpdateLoadBalancerFailed")
			}
			ev.emu.ResetRequests()
			if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatal(err)
			}
			if err := ev.exec.Settle(ctx, svc.UID); err != nil {
				t.Fatal(err)
			}
			if got := lbReads(ev.emu); got != 1 {
				t.Errorf("load balancer reads after the failed action = %d, want 1 (the cache forgot it)", got)
			}
			if got := len(ev.onlyLB().Targets); got != 3 {
				t.Errorf("targets = %d, want 3 (the failed add repeated)", got)
			}
		})
	}
}
