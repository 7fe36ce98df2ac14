package loadbalancer_test

import (
	"context"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// TestDeleteProtection_Lifecycle runs the change_protection kind against the emulator: the
// annotation protects a new load balancer (its own request after the create, decided as
// change_protection), a protected one survives EnsureLoadBalancerDeleted (DeleteProtected), a
// denied change_protection leaves the protection as it is, and false lets the delete through.
func TestDeleteProtection_Lifecycle(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBDeleteProtection, "true"))
	ev.mustEnsure(svc)
	if lb := ev.onlyLB(); !lb.Protection.Delete {
		t.Fatalf("load balancer %s is not protected after the create", lb.Name)
	}
	if got := ev.emu.Counts()["POST /v1/load_balancers/{id}/actions/change_protection"]; got != 1 {
		t.Errorf("change_protection requests = %d, want 1: %v", got, ev.emu.Counts())
	}
	if !decided(ev, lbplan.OpChangeProtection) {
		t.Error("no policy decision of change_protection")
	}

	if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, svc); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v (want nil: kept, as the official CCM)", err)
	}
	if len(ev.emu.LoadBalancers()) != 1 || !hasEvent(ev.events(), "Warning DeleteProtected") {
		t.Fatalf("the protected load balancer was deleted, or no DeleteProtected event: %v", ev.emu.Counts())
	}

	unprotect := newService("web", withPorts(80), withAnnotation(annotation.LBDeleteProtection, "false"))
	ev.decider.set(false, lbplan.OpChangeProtection)
	if _, err := ev.ensure(unprotect); err == nil {
		t.Fatal("EnsureLoadBalancer with change_protection denied succeeded")
	}
	if !ev.onlyLB().Protection.Delete {
		t.Fatal("a denied change_protection removed the protection")
	}

	ev.decider.set(false)
	ev.mustEnsure(unprotect)
	if ev.onlyLB().Protection.Delete {
		t.Fatal("false did not remove the protection")
	}
	if err := ev.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, unprotect); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	if n := len(ev.emu.LoadBalancers()); n != 0 {
		t.Errorf("%d load balancers left after the protection was removed, want 0", n)
	}
}

// decided reports whether ev's decider decided an input with operation op.
func decided(ev *env, op string) bool {
	ev.decider.mu.Lock()
	defer ev.decider.mu.Unlock()
	for _, in := range ev.decider.inputs {
		if in.Operation == op {
			return true
		}
	}
	return false
}
