package loadbalancer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
)

// tracker records the calls of a DenialTracker, as "denied ns/name" and "settled ns/name".
type tracker struct{ calls []string }

func (tr *tracker) Denied(svc *corev1.Service) {
	tr.calls = append(tr.calls, "denied "+svc.Namespace+"/"+svc.Name)
}

func (tr *tracker) Settled(svc *corev1.Service) {
	tr.calls = append(tr.calls, "settled "+svc.Namespace+"/"+svc.Name)
}

// TestDenialTracker: every denied plan is reported; Ensure and EnsureDeleted report a result
// that is not a denial as settled; Update reports only denials (it skips a missing load
// balancer, so its success says nothing about the Service's last denial).
func TestDenialTracker(t *testing.T) {
	tr := &tracker{}
	ev := newEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tr }))
	ctx := context.Background()
	svc := newService("web", withPorts(80))

	ev.decider.set(true)
	_, _ = ev.ensure(svc)
	_ = ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes) // no load balancer yet: nothing
	ev.decider.set(false)
	_ = ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes) // no load balancer yet: nothing
	ev.mustEnsure(svc)
	ev.decider.set(true)
	_ = ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes[:1])
	_ = ev.lbs.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	ev.decider.set(false)
	if err := ev.lbs.EnsureLoadBalancerDeleted(ctx, clusterName, svc); err != nil {
		t.Fatalf("delete: %v", err)
	}

	want := []string{
		"denied shop/web",  // Ensure
		"settled shop/web", // Ensure, allowed
		"denied shop/web",  // Update removing a target
		"denied shop/web",  // EnsureDeleted
		"settled shop/web", // EnsureDeleted, allowed
	}
	if diff := cmp.Diff(want, tr.calls); diff != "" {
		t.Errorf("tracker calls (-want +got):\n%s\nevents: %s", diff, strings.Join(ev.events(), "\n"))
	}
}
