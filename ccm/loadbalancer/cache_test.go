package loadbalancer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// lbReads counts the GET /v1/load_balancers requests since the last reset.
func lbReads(emu *hcloudemu.Emulator) int {
	n := 0
	for _, r := range emu.Requests() {
		if r.Method == "GET" && strings.HasPrefix(r.Path, "/v1/load_balancers") {
			n++
		}
	}
	return n
}

// TestUpdateLoadBalancer_cache covers how UpdateLoadBalancer reads through ccm/lbcache: no read
// for an unchanged or changed node set within the max age, and a change behind the CCM's back
// repaired once the max age has passed.
func TestUpdateLoadBalancer_cache(t *testing.T) {
	tests := []struct {
		name   string
		maxAge time.Duration
		wait   time.Duration
		// wantReads are the load balancer reads of the Update after the drift; wantRepaired is
		// whether it put the removed target back.
		wantReads    int
		wantRepaired bool
	}{
		{"within the max age the Update plans from the cache", time.Hour, 0, 0, false},
		{"after the max age the Update lists and repairs the drift", 50 * time.Millisecond, 100 * time.Millisecond, 1, true},
		{"without a cache every Update reads and repairs", -1, 0, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) { o.CacheMaxAge = tt.maxAge }))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			// Our own writes need no read: the third node joins and leaves.
			ev.emu.ResetRequests()
			for _, nodes := range [][]*corev1.Node{ev.nodes[:2], ev.nodes, ev.nodes[:2]} {
				if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, nodes); err != nil {
					t.Fatal(err)
				}
			}
			if tt.maxAge > 0 && tt.wait == 0 {
				if got := lbReads(ev.emu); got != 0 {
					t.Errorf("load balancer reads for 3 Updates after our own writes = %d, want 0 (%v)", got, ev.emu.Counts())
				}
				if got := ev.emu.MutatingRequests(); got != 2 {
					t.Errorf("mutating requests = %d, want 2 (add and remove the third node)", got)
				}
			}
			// Behind the CCM's back: remove the first target.
			lb := ev.onlyLB()
			first := lb.Targets[0].Server.Server
			if _, _, err := ev.client.LoadBalancer.RemoveServerTarget(ctx, lb, first); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tt.wait)
			ev.emu.ResetRequests()
			if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			if got := lbReads(ev.emu); got != tt.wantReads {
				t.Errorf("load balancer reads = %d, want %d (%v)", got, tt.wantReads, ev.emu.Counts())
			}
			if got := len(ev.onlyLB().Targets) == 2; got != tt.wantRepaired {
				t.Errorf("repaired = %v, want %v (targets %d)", got, tt.wantRepaired, len(ev.onlyLB().Targets))
			}
			// EnsureLoadBalancer always reads fresh and repairs at once.
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			if got := len(ev.onlyLB().Targets); got != 2 {
				t.Errorf("targets after Ensure = %d, want 2", got)
			}
		})
	}
}

// TestUpdateLoadBalancer_failedRunReadsAgain: after a run that failed, the next Update reads the
// load balancer instead of trusting the cache.
func TestUpdateLoadBalancer_failedRunReadsAgain(t *testing.T) {
	ev := newEnv(t, withServers(3))
	ctx := context.Background()
	svc := newService("web", withPorts(80))
	if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
		t.Fatal(err)
	}
	// The add is applied, but its answer is an error: the cache cannot know the target exists.
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", Times: 1, Status: 422, Code: "invalid_input", AfterCommit: true})
	if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err == nil {
		t.Fatal("Update with a failing add_target: no error")
	}
	ev.emu.ResetRequests()
	if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
		t.Fatal(err)
	}
	if got := lbReads(ev.emu); got != 1 {
		t.Errorf("load balancer reads after a failed run = %d, want 1 (the Service read alone)", got)
	}
	if got := ev.emu.MutatingRequests(); got != 0 {
		t.Errorf("mutating requests after a failed run = %d, want 0 (the target was added)", got)
	}
	if got := len(ev.onlyLB().Targets); got != 3 {
		t.Errorf("targets = %d, want 3", got)
	}
}

// TestNonUniqueIsAnError: two load balancers with the Service's UID label are an error for
// every call, cached or not; nothing is created or changed.
func TestNonUniqueIsAnError(t *testing.T) {
	calls := []struct {
		name string
		call func(ev *env, svc *corev1.Service) error
	}{
		{"GetLoadBalancer", func(ev *env, svc *corev1.Service) error {
			_, _, err := ev.lbs.GetLoadBalancer(context.Background(), clusterName, svc)
			return err
		}},
		{"EnsureLoadBalancer", func(ev *env, svc *corev1.Service) error {
			_, err := ev.lbs.EnsureLoadBalancer(context.Background(), clusterName, svc, ev.nodes)
			return err
		}},
		{"UpdateLoadBalancer", func(ev *env, svc *corev1.Service) error {
			return ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, svc, ev.nodes)
		}},
		{"EnsureLoadBalancerDeleted", func(ev *env, svc *corev1.Service) error {
			return ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc)
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			ev := newEnv(t)
			for _, n := range []string{"one", "two"} {
				if _, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: n, Labels: map[string]string{lbplan.LabelServiceUID: testUID}}); err != nil {
					t.Fatal(err)
				}
			}
			ev.emu.ResetRequests()
			err := c.call(ev, newService("web", withPorts(80)))
			if !errors.Is(err, loadbalancer.ErrNonUniqueResult) {
				t.Errorf("err = %v, want ErrNonUniqueResult", err)
			}
			if got := ev.emu.MutatingRequests(); got != 0 {
				t.Errorf("mutating requests = %d, want 0", got)
			}
		})
	}
}
