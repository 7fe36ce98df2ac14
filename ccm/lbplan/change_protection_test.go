package lbplan_test

import (
	"slices"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// TestCompute_DeleteProtection is the planner rule of change_protection: the annotation's
// value when it differs from the load balancer's, nothing without the annotation, and on a
// create its own request after the create (POST /load_balancers takes no protection).
func TestCompute_DeleteProtection(t *testing.T) {
	protected := func(lb *hcloud.LoadBalancer) { lb.Protection.Delete = true }
	web := func(value string) lbservice.DesiredInput {
		svc := newService("web", withPorts(80))
		if value != "" {
			svc.Annotations[string(annotation.LBDeleteProtection)] = value
		}
		return newInput(svc)
	}
	tests := []struct {
		name   string
		in     lbservice.DesiredInput
		actual *hcloud.LoadBalancer
		want   []string
		// requests are the labels of the requests' mutations (Plan.Requests), one row each.
		requests [][]string
	}{
		{
			name: "true protects a new load balancer after its create",
			in:   web("true"), want: []string{"create(web-lb)", "change_protection(delete=true)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
			requests: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}, {"change_protection(delete=true)"}},
		},
		{
			name: "false on a create plans nothing: a new load balancer has no protection",
			in:   web("false"), want: []string{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"},
			requests: [][]string{{"create(web-lb)", "add_service(80)", "add_target(server:1)", "add_target(server:2)"}},
		},
		{
			name: "true protects an unprotected load balancer",
			in:   web("true"), actual: newLB(),
			want: []string{"change_protection(delete=true)"}, requests: [][]string{{"change_protection(delete=true)"}},
		},
		{
			name: "false removes the protection",
			in:   web("FALSE"), actual: newLB(protected),
			want: []string{"change_protection(delete=false)"}, requests: [][]string{{"change_protection(delete=false)"}},
		},
		{
			name: "a protection the annotation asks for is kept",
			in:   web("true"), actual: newLB(protected),
		},
		{
			name: "without the annotation a protection set by hand is left alone (as the official CCM)",
			in:   web(""), actual: newLB(protected),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var actual *lbplan.Actual
			if tc.actual != nil {
				actual = lbplan.NewActual(tc.actual)
			}
			plan, err := lbplan.Compute(mustDesired(t, tc.in), actual)
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if got := plan.Labels(); !slices.Equal(got, tc.want) {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
			var requests [][]string
			for _, r := range plan.Requests() {
				requests = append(requests, r.Labels())
			}
			if !slices.EqualFunc(requests, tc.requests, slices.Equal) {
				t.Errorf("requests = %v, want %v", requests, tc.requests)
			}
		})
	}
}

// TestPlan_StepsShowTheProtection: the policy input of change_protection has the protection
// before (current.protected) and after (load_balancer.protected), and the final state keeps it.
func TestPlan_StepsShowTheProtection(t *testing.T) {
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBDeleteProtection, "true"))
	plan, err := lbplan.Compute(mustDesired(t, newInput(svc)), lbplan.NewActual(newLB()))
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	steps := plan.Steps()
	if len(steps) != 1 {
		t.Fatalf("steps = %d, want 1", len(steps))
	}
	st := steps[0]
	if st.Mutation.Operation() != lbplan.OpChangeProtection || st.Current.Protected || !st.LoadBalancer.Protected || !st.Final.Protected {
		t.Errorf("step %s: current.protected %t, load_balancer.protected %t, final.protected %t; want change_protection, false, true, true",
			st.Label(), st.Current.Protected, st.LoadBalancer.Protected, st.Final.Protected)
	}
	if st.Target != nil || st.Listener != nil || st.Certificate != nil {
		t.Errorf("step %s names a target, listener or certificate: %+v %+v %+v", st.Label(), st.Target, st.Listener, st.Certificate)
	}
}
