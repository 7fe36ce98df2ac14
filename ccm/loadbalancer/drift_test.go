package loadbalancer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
)

// driftTracker is a DenialTracker that records the Services synced for drift; the Services in
// scheduled have a retry of a failed update scheduled (ActionRetryTracker).
type driftTracker struct {
	mu        sync.Mutex
	drifted   []string
	scheduled map[string]bool
}

func (d *driftTracker) ActionFailed(*corev1.Service, error) {}
func (d *driftTracker) Synced(*corev1.Service)              {}
func (d *driftTracker) SyncFailed(*corev1.Service, error)   {}
func (d *driftTracker) RetryScheduled(svc *corev1.Service) (time.Time, bool) {
	if d.scheduled[svc.Namespace+"/"+svc.Name] {
		return time.Now().Add(time.Minute), true
	}
	return time.Time{}, false
}

func (d *driftTracker) Denied(*corev1.Service)  {}
func (d *driftTracker) Settled(*corev1.Service) {}
func (d *driftTracker) Drifted(svcs []*corev1.Service, _ string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range svcs {
		d.drifted = append(d.drifted, s.Namespace+"/"+s.Name)
	}
}

func (d *driftTracker) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.drifted)
}

var _ loadbalancer.DriftRequeuer = (*driftTracker)(nil)
var _ loadbalancer.ActionRetryTracker = (*driftTracker)(nil)

// TestCheckDrift: one list (one page) compares every load balancer with the state the CCM's
// last successful plan left it in; a Service whose load balancer was changed (listener,
// target) or deleted by hand is synced, an unchanged one or one repaired since is not.
func TestCheckDrift(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the load balancer behind the CCM's back (nil: nothing).
		edit func(t *testing.T, ev *env, lb *hcloud.LoadBalancer)
		// repair runs EnsureLoadBalancer after the edit.
		repair bool
		// retrying: the Service has a retry of a failed update scheduled.
		retrying bool
		want     []string
	}{
		{name: "an unchanged load balancer is not synced"},
		{
			name: "a target removed by hand is synced",
			edit: func(t *testing.T, ev *env, lb *hcloud.LoadBalancer) {
				if _, _, err := ev.client.LoadBalancer.RemoveServerTarget(context.Background(), lb, lb.Targets[0].Server.Server); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"shop/web"},
		},
		{
			name: "a listener removed by hand is synced",
			edit: func(t *testing.T, ev *env, lb *hcloud.LoadBalancer) {
				if _, _, err := ev.client.LoadBalancer.DeleteService(context.Background(), lb, 80); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"shop/web"},
		},
		{
			name: "a load balancer deleted by hand is synced",
			edit: func(t *testing.T, ev *env, lb *hcloud.LoadBalancer) {
				if _, _, err := ev.client.LoadBalancer.DeleteWithResult(context.Background(), lb); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"shop/web"},
		},
		{
			name: "a Service whose failed update has a retry scheduled is left to that retry",
			edit: func(t *testing.T, ev *env, lb *hcloud.LoadBalancer) {
				if _, _, err := ev.client.LoadBalancer.RemoveServerTarget(context.Background(), lb, lb.Targets[0].Server.Server); err != nil {
					t.Fatal(err)
				}
			},
			retrying: true,
		},
		{
			name: "a hand edit an Ensure repaired since is not synced",
			edit: func(t *testing.T, ev *env, lb *hcloud.LoadBalancer) {
				if _, _, err := ev.client.LoadBalancer.RemoveServerTarget(context.Background(), lb, lb.Targets[0].Server.Server); err != nil {
					t.Fatal(err)
				}
			},
			repair: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker := &driftTracker{}
			ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatal(err)
			}
			tracker.scheduled = map[string]bool{"shop/web": tt.retrying}
			if tt.edit != nil {
				tt.edit(t, ev, ev.onlyLB())
			}
			if tt.repair {
				if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Millisecond) // the list starts after the last record
			ev.emu.ResetRequests()
			pages, synced, err := ev.lbs.CheckDrift(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pages != 1 || lbReads(ev.emu) != 1 || ev.emu.MutatingRequests() != 0 {
				t.Errorf("pages %d, load balancer reads %d, mutating requests %d; want 1, 1, 0 (%v)", pages, lbReads(ev.emu), ev.emu.MutatingRequests(), ev.emu.Counts())
			}
			if got := tracker.got(); synced != len(tt.want) || !slices.Equal(got, tt.want) {
				t.Errorf("synced %d %v, want %v", synced, got, tt.want)
			}
		})
	}
}

// TestCheckDrift_lister: after a restart nothing is recorded; a Service of the lister whose
// status shows an address but whose load balancer is gone is synced, one without an address
// (not created yet) or with its load balancer is not.
func TestCheckDrift_lister(t *testing.T) {
	tracker := &driftTracker{}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) {
		o.DenialTracker = tracker
		o.Services = corelisters.NewServiceLister(idx)
	}))
	ctx := context.Background()
	withIngress := func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	}
	uid := func(u string) serviceTweak { return func(s *corev1.Service) { s.UID = types.UID(u) } }
	gone := newService("gone", withPorts(80), withIngress, uid("uid-gone"))
	kept := newService("kept", withPorts(81), withIngress, uid("uid-kept"))
	fresh := newService("fresh", withPorts(82), uid("uid-fresh"))
	for _, s := range []*corev1.Service{gone, kept} {
		if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, s, ev.nodes); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*corev1.Service{gone, kept, fresh} {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, lb := range ev.emu.LoadBalancers() {
		if lb.Labels["hcloud-ccm/service-uid"] == string(gone.UID) {
			if _, _, err := ev.client.LoadBalancer.DeleteWithResult(ctx, &hcloud.LoadBalancer{ID: lb.ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A restarted CCM: nothing recorded.
	restarted := newLoadBalancers(t, loadbalancer.Options{Readers: ev.readers(), Executor: ev.exec, Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"}, DenialTracker: tracker, Services: corelisters.NewServiceLister(idx)})
	if _, synced, err := restarted.CheckDrift(ctx); err != nil || synced != 1 {
		t.Fatalf("CheckDrift = %d, %v; want 1 Service synced", synced, err)
	}
	if got := tracker.got(); !slices.Equal(got, []string{"shop/gone"}) {
		t.Errorf("synced %v, want [shop/gone]", got)
	}
}

// TestUpdateLoadBalancer_deletedByHand: an Update that finds no load balancer for a Service
// that had one syncs it (its Ensure recreates it); a Service that never had one is left alone.
func TestUpdateLoadBalancer_deletedByHand(t *testing.T) {
	tracker := &driftTracker{}
	ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker; o.CacheMaxAge = -1 }))
	ctx := context.Background()
	svc := newService("web", withPorts(80))
	never := newService("never", withPorts(81), func(s *corev1.Service) { s.UID = "uid-never" })
	if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ev.client.LoadBalancer.DeleteWithResult(ctx, ev.onlyLB()); err != nil {
		t.Fatal(err)
	}
	ev.emu.ResetRequests()
	for _, s := range []*corev1.Service{svc, never} {
		if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, s, ev.nodes); err != nil {
			t.Fatal(err)
		}
	}
	if got := tracker.got(); !slices.Equal(got, []string{"shop/web"}) {
		t.Errorf("synced %v, want [shop/web]", got)
	}
	if n := ev.emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating requests, want 0: the Update leaves the create to the Ensure", n)
	}
}

// TestDriftPeriod: the interval, unless the list would spend more than half the budget.
func TestDriftPeriod(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		pages    int
		budget   int
		want     time.Duration
	}{
		{"50 load balancers, default budget: the interval", 10 * time.Minute, 1, 60, 10 * time.Minute},
		{"200 load balancers, default budget: the interval", 10 * time.Minute, 4, 60, 10 * time.Minute},
		{"1,000 load balancers, default budget: paced to half the budget", 10 * time.Minute, 20, 60, 40 * time.Minute},
		{"a short interval is paced", time.Minute, 1, 60, 2 * time.Minute},
		{"no page is one request", time.Minute, 0, 60, 2 * time.Minute},
		{"a large budget allows a short interval", 2 * time.Second, 1, 3600, 2 * time.Second},
		{"no budget: the interval", time.Second, 100, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadbalancer.DriftPeriod(tt.interval, tt.pages, tt.budget); got != tt.want {
				t.Errorf("DriftPeriod(%s, %d, %d) = %s, want %s", tt.interval, tt.pages, tt.budget, got, tt.want)
			}
		})
	}
}

// TestCheckDrift_cost is the steady cost of one drift check at 50 and 200 load balancers: one
// list page per 50 (1 and 4 requests), nothing else, nothing synced when nothing drifted.
func TestCheckDrift_cost(t *testing.T) {
	tests := []struct {
		lbs       int
		wantPages int
	}{{50, 1}, {200, 4}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.lbs, " load balancers"), func(t *testing.T) {
			tracker := &driftTracker{}
			ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
			ctx := context.Background()
			for i := range tt.lbs {
				svc := newService(fmt.Sprint("web-", i), withPorts(80), func(s *corev1.Service) { s.UID = types.UID(fmt.Sprint("uid-", i)) })
				if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Millisecond)
			ev.emu.ResetRequests()
			pages, synced, err := ev.lbs.CheckDrift(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ev.emu.Requests()); pages != tt.wantPages || n != tt.wantPages || synced != 0 {
				t.Errorf("pages %d, requests %d, synced %d; want %d, %d, 0 (%v)", pages, n, synced, tt.wantPages, tt.wantPages, ev.emu.Counts())
			}
		})
	}
}

// clearingTracker is a driftTracker that also clears statuses (StatusClearer).
type clearingTracker struct {
	driftTracker
	cleared []string
}

func (c *clearingTracker) ClearStatus(_ context.Context, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleared = append(c.cleared, svc.Namespace+"/"+svc.Name)
	return nil
}

// TestEnsureLoadBalancer_deniedRecreateClearsStatus: a Service with an address whose load
// balancer was deleted by hand, and whose re-create the policy denies, has its status cleared
// with a Warning event; a denied change of a load balancer that exists clears nothing.
func TestEnsureLoadBalancer_deniedRecreateClearsStatus(t *testing.T) {
	tests := []struct {
		name         string
		deleteByHand bool
		wantCleared  []string
	}{
		{"deleted by hand, re-create denied: cleared", true, []string{"shop/web"}},
		{"exists, change denied: kept", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tracker := &clearingTracker{}
			ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatal(err)
			}
			if tt.deleteByHand {
				if _, _, err := ev.client.LoadBalancer.DeleteWithResult(ctx, ev.onlyLB()); err != nil {
					t.Fatal(err)
				}
			}
			svc = newService("web", withPorts(80, 81), func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			})
			ev.decider.set(true)
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes); err == nil {
				t.Fatal("EnsureLoadBalancer under a deny-all policy succeeded")
			}
			if !slices.Equal(tracker.cleared, tt.wantCleared) {
				t.Errorf("cleared %v, want %v", tracker.cleared, tt.wantCleared)
			}
			if got := hasEvent(ev.events(), "Warning LoadBalancerStatusCleared"); got != (tt.wantCleared != nil) {
				t.Errorf("LoadBalancerStatusCleared event: %v, want %v (%v)", got, tt.wantCleared != nil, ev.events())
			}
		})
	}
}
