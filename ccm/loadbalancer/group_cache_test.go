package loadbalancer_test

import (
	"context"
	"testing"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestGroup_UpdateDetached: a member's Update reads the group's load balancer through the cache
// and sends a target change detached; when its action then fails, the member is retried
// (ActionFailureTracker) and the group's cache entry forgotten, so the next member's Update
// reads the load balancer again and adds the target again. Without the failure, the other
// members' Updates read nothing and send nothing.
func TestGroup_UpdateDetached(t *testing.T) {
	tests := []struct {
		name        string
		fail        bool
		wantRetried int
		wantReads   int // load balancer reads of the second member's Update
		wantSent    int // mutating requests of the second member's Update
	}{
		{"the first member's change is in the cache for the others", false, 0, 0, 0},
		{"a failed action forgets the group's entry and retries the member", true, 1, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tracker := &failureTracker{}
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			g := &groupEnv{env: newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) {
				o.Services = corelisters.NewServiceLister(idx)
				o.DenialTracker = tracker
			})), idx: idx}
			ctx := context.Background()
			a := groupMember("a", 0, "web", []int32{80})
			b := groupMember("b", 1, "web", []int32{81})
			g.add(a, b)
			if _, err := g.lbs.EnsureLoadBalancer(ctx, clusterName, a, g.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			if tc.fail {
				g.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1})
			}
			g.emu.ResetRequests()
			if err := g.lbs.UpdateLoadBalancer(ctx, clusterName, a, g.nodes); err != nil {
				t.Fatalf("Update = %v, want nil (the API accepted the request)", err)
			}
			if got := lbReads(g.emu); got != 0 {
				t.Errorf("the first Update read the load balancer %d times, want 0 (the cache holds what the Ensure wrote)", got)
			}
			if err := g.exec.Settle(ctx, a.UID); err != nil {
				t.Fatal(err)
			}
			if got := tracker.get(); len(got) != tc.wantRetried {
				t.Errorf("retried %v, want %d", got, tc.wantRetried)
			}
			g.emu.ResetRequests()
			if err := g.lbs.UpdateLoadBalancer(ctx, clusterName, b, g.nodes); err != nil {
				t.Fatal(err)
			}
			if err := g.exec.Settle(ctx, b.UID); err != nil {
				t.Fatal(err)
			}
			if reads, sent := lbReads(g.emu), g.emu.MutatingRequests(); reads != tc.wantReads || sent != tc.wantSent {
				t.Errorf("the second member's Update: %d reads, %d mutating requests; want %d, %d", reads, sent, tc.wantReads, tc.wantSent)
			}
			if got := len(g.onlyLB().Targets); got != 3 {
				t.Errorf("targets = %d, want 3", got)
			}
		})
	}
}
