package executor_test

import (
	"context"
	"net"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestRun_AddIPTarget: an IP target (a Robot node) is added with its policy input naming it;
// one that a concurrent reconcile added first (target_already_defined) counts as done.
func TestRun_AddIPTarget(t *testing.T) {
	var inputs []input.Input
	ev := newEnv(t, func(in input.Input) policy.Decision {
		inputs = append(inputs, in)
		return policy.Decision{Allowed: true}
	})
	ctx := context.Background()
	lb := ev.bareLB(t)
	add := func(ip string) error {
		p := lbplan.Plan{Actual: lbplan.NewActual(lb), IPv6: true, Mutations: []lbplan.Mutation{
			lbplan.AddIPTarget{Target: lbplan.IPTarget{IP: ip, Node: "bm-1"}},
		}}
		_, err := ev.exec.Run(ctx, newService(), p)
		return err
	}
	if err := add("203.0.113.50"); err != nil {
		t.Fatalf("add_target(ip): %v", err)
	}
	if len(inputs) != 1 || inputs[0].Operation != "add_target" || inputs[0].Target == nil ||
		*inputs[0].Target != (input.LBTarget{Type: "ip", IP: "203.0.113.50"}) {
		t.Errorf("policy inputs = %+v, want one add_target with target {ip 203.0.113.50}", inputs)
	}
	// lb (the plan's view) still lacks the target: the API answers target_already_defined.
	if err := add("203.0.113.50"); err != nil {
		t.Errorf("add_target(ip) of a target a concurrent reconcile added: %v, want done", err)
	}
	got, _, err := ev.client.LoadBalancer.GetByID(ctx, lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tg := range got.Targets {
		if tg.Type == hcloud.LoadBalancerTargetTypeIP && net.ParseIP(tg.IP.IP).Equal(net.ParseIP("203.0.113.50")) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("load balancer has %d IP targets 203.0.113.50, want 1: %+v", n, got.Targets)
	}
}
