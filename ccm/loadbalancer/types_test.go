package loadbalancer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// deprecate marks the emulator's type name deprecated, orderable until unavailableAfter.
func deprecate(t *testing.T, emu *hcloudemu.Emulator, id int64, name string, unavailableAfter time.Time) {
	t.Helper()
	lt := schema.LoadBalancerType{ID: id, Name: name, Description: strings.ToUpper(name), MaxServices: 5, MaxTargets: 25, MaxConnections: 10000, MaxAssignedCertificates: 10}
	lt.Deprecation = &schema.DeprecationInfo{Announced: unavailableAfter.AddDate(0, -3, 0), UnavailableAfter: unavailableAfter}
	if err := emu.ApplySeed(hcloudemu.Seed{LoadBalancerTypes: []schema.LoadBalancerType{lt}}); err != nil {
		t.Fatal(err)
	}
}

func countEvents(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// TestLoadBalancerTypeDeprecation: as the official CCM, a deprecated type warns
// LoadBalancerTypeDeprecated on every reconcile (create, unchanged Ensure, Update), and a type
// that can no longer be ordered is refused before any write, also on a load balancer that has it.
func TestLoadBalancerTypeDeprecation(t *testing.T) {
	future := time.Date(2099, 1, 31, 0, 0, 0, 0, time.UTC)
	past := time.Date(2020, 1, 31, 0, 0, 0, 0, time.UTC)

	t.Run("deprecated: a warning on every reconcile", func(t *testing.T) {
		ev := newEnv(t) // HCLOUD_LOAD_BALANCERS_TYPE=lb11
		deprecate(t, ev.emu, 1, "lb11", future)
		svc := newService("web", withPorts(80))
		want := `Warning LoadBalancerTypeDeprecated Load Balancer Type "lb11" is deprecated and will no longer be available for order as of 2099-01-31`
		ev.mustEnsure(svc)
		ev.mustEnsure(svc)
		if err := ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, svc, ev.nodes); err != nil {
			t.Fatal(err)
		}
		if events := ev.events(); countEvents(events, want) != 3 {
			t.Errorf("events = %q, want %q three times", events, want)
		}
		if lb := ev.onlyLB(); lb.LoadBalancerType.Name != "lb11" {
			t.Errorf("type = %s", lb.LoadBalancerType.Name)
		}
	})

	t.Run("unavailable: a create is refused before any write", func(t *testing.T) {
		ev := newEnv(t)
		deprecate(t, ev.emu, 2, "lb21", past)
		_, err := ev.ensure(newService("web", withPorts(80), withAnnotation(annotation.LBType, "lb21")))
		want := `Load Balancer Type "lb21" is unavailable and can no longer be ordered: set "load-balancer.hetzner.cloud/type" to a type that can be ordered`
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %s", err, want)
		}
		if n := ev.emu.MutatingRequests(); n != 0 {
			t.Errorf("%d mutating requests", n)
		}
		if events := ev.events(); hasEvent(events, "Warning LoadBalancerTypeDeprecated") || hasEvent(events, "Warning InvalidAnnotation") {
			t.Errorf("events = %q, want neither LoadBalancerTypeDeprecated nor InvalidAnnotation (the official emits none)", events)
		}
	})

	t.Run("unavailable: a load balancer that has the type is no longer reconciled", func(t *testing.T) {
		ev := newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) { o.TypeCacheMaxAge = -1 }))
		all := ev.nodes
		svc := newService("web", withPorts(80))
		if _, err := ev.lbs.EnsureLoadBalancer(context.Background(), clusterName, svc, all[:2]); err != nil {
			t.Fatal(err)
		}
		deprecate(t, ev.emu, 1, "lb11", past)
		before := ev.emu.MutatingRequests()
		err := ev.lbs.UpdateLoadBalancer(context.Background(), clusterName, svc, all) // a third node would be added
		if err == nil || !strings.Contains(err.Error(), `"lb11" is unavailable`) || !strings.Contains(err.Error(), `set "HCLOUD_LOAD_BALANCERS_TYPE"`) {
			t.Fatalf("err = %v, want the unavailable type naming HCLOUD_LOAD_BALANCERS_TYPE", err)
		}
		if n := ev.emu.MutatingRequests() - before; n != 0 {
			t.Errorf("%d mutating requests", n)
		}
	})
}
