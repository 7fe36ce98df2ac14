package loadbalancer_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestAuditPlans_EqualsCreate is the audit's property (docs/policy.md § Audit): the audit
// input of an existing load balancer equals the create input of a fresh Service with the same
// spec (Preview against an emulator without the load balancer), also after the Service changed
// since its load balancer was made; and the audit sends no mutating request.
func TestAuditPlans_EqualsCreate(t *testing.T) {
	web := func(name string, age int, ports ...int32) *corev1.Service {
		return groupMember(name, age, "web", ports)
	}
	tests := []struct {
		name string
		svcs []*corev1.Service
		// change is applied to every Service after its load balancer exists and before the audit.
		change func(*corev1.Service)
	}{
		{name: "A Service with one port", svcs: []*corev1.Service{groupMember("a", 0, "", []int32{80})}},
		{name: "A Service with settings and two ports", svcs: []*corev1.Service{groupMember("a", 0, "", []int32{80, 443},
			withAnnotation(annotation.LBType, "lb21"), withAnnotation(annotation.LBAlgorithmType, "least_connections"))}},
		{name: "A Service changed since its load balancer was made", svcs: []*corev1.Service{groupMember("a", 0, "", []int32{80})},
			change: func(s *corev1.Service) { s.Annotations[string(annotation.LBType)] = "lb31" }},
		{name: "The members of a load balancer group", svcs: []*corev1.Service{web("a", 0, 80), web("b", 1, 81), web("c", 2, 82)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			existing := newGroupEnv(t)
			existing.add(tc.svcs...)
			for _, svc := range tc.svcs {
				existing.mustEnsure(svc)
			}
			fresh := newGroupEnv(t)
			var svcs []*corev1.Service
			for _, svc := range tc.svcs {
				svc = svc.DeepCopy()
				if tc.change != nil {
					tc.change(svc)
				}
				svcs = append(svcs, svc)
			}
			existing.add(svcs...)
			fresh.add(svcs...)
			mutating := existing.emu.MutatingRequests()
			plans, err := existing.lbs.AuditPlans(context.Background(), clusterName, existing.nodes, noDenials)
			if err != nil {
				t.Fatal(err)
			}
			if n := existing.emu.MutatingRequests() - mutating; n != 0 {
				t.Errorf("AuditPlans sent %d mutating requests, want 0", n)
			}
			if len(plans) != len(svcs) {
				t.Fatalf("AuditPlans() = %d plans, want %d", len(plans), len(svcs))
			}
			for i, svc := range svcs {
				if plans[i].Err != nil || plans[i].Service.Name != svc.Name {
					t.Fatalf("AuditPlans()[%d] = %s, %v; want %s without error", i, plans[i].Service.Name, plans[i].Err, svc.Name)
				}
				create, err := fresh.lbs.Preview(context.Background(), clusterName, svc, fresh.nodes, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := inputsJSON(t, plans[i].Plan, svc), inputsJSON(t, create, svc); got != want {
					t.Errorf("audit input of %s:\n%s\nwant the create input of a fresh Service:\n%s", svc.Name, got, want)
				}
				if ops := plans[i].Plan.Steps(); len(ops) == 0 || ops[0].Mutation.Operation() != lbplan.OpCreate {
					t.Errorf("audit plan of %s = %v, want a create", svc.Name, plans[i].Plan.Labels())
				}
			}
		})
	}
}

// TestAuditPlans_LeavesOutRefusedMembers: a group member the policy refuses is left out of the
// other members' audit plans, as their syncs leave it out (a denied create blames every other
// member whose listener rides along, so each member's create carries its own listeners), and
// keeps its listener in its own plan, whose decision the audit reports.
func TestAuditPlans_LeavesOutRefusedMembers(t *testing.T) {
	g := newGroupEnv(t)
	a, b, c := groupMember("a", 0, "web", []int32{80}), groupMember("b", 1, "web", []int32{81}), groupMember("c", 2, "web", []int32{82})
	g.add(a, b, c)
	for _, svc := range []*corev1.Service{a, b, c} {
		g.mustEnsure(svc)
	}
	refuseC := func(_ context.Context, _ *corev1.Service, plan lbplan.Plan) []int {
		var out []int
		for i, st := range plan.Steps() {
			if slices.ContainsFunc(st.LoadBalancer.Services, func(s input.LBService) bool { return s.ListenPort == 82 }) {
				out = append(out, i)
			}
		}
		return out
	}
	plans, err := g.lbs.AuditPlans(context.Background(), clusterName, g.nodes, refuseC)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{"a": {80}, "b": {81}, "c": {82}}
	for _, p := range plans {
		var ports []int
		for _, s := range p.Plan.Steps()[0].LoadBalancer.Services {
			ports = append(ports, s.ListenPort)
		}
		slices.Sort(ports)
		if !slices.Equal(ports, want[p.Service.Name]) {
			t.Errorf("audit plan of %s has listeners %v, want %v", p.Service.Name, ports, want[p.Service.Name])
		}
	}
}

// noDenials is a StepDenier that denies nothing.
func noDenials(context.Context, *corev1.Service, lbplan.Plan) []int { return nil }

var _ loadbalancer.StepDenier = noDenials

// inputsJSON is the JSON of the policy inputs of plan for svc.
func inputsJSON(t *testing.T, plan lbplan.Plan, svc *corev1.Service) string {
	t.Helper()
	b, err := json.MarshalIndent(gate.Inputs(plan, input.Cluster{Name: clusterName}, gate.PolicyService(svc, nil)), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuditPlansFrom_NoRequest: planning from the reads of an earlier audit sends no request to
// Hetzner (where an audit that reads sends some: the list of the groups' load balancers), plans
// today's Services (a changed type is in the plan), and names a Service whose load balancer
// those reads did not see with ErrNotRead.
func TestAuditPlansFrom_NoRequest(t *testing.T) {
	g := newGroupEnv(t)
	own, a, b := groupMember("own", 0, "", []int32{80}), groupMember("a", 1, "web", []int32{81}), groupMember("b", 2, "web", []int32{82})
	g.add(own, a, b)
	for _, svc := range []*corev1.Service{own, a, b} {
		g.mustEnsure(svc)
	}
	late := groupMember("late", 3, "", []int32{83})
	g.mustEnsure(late) // its load balancer exists; the reads below do not see it (not listed yet)

	g.emu.ResetRequests()
	_, reads, err := g.lbs.AuditPlansFrom(context.Background(), clusterName, g.nodes, noDenials, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.emu.Requests()); n == 0 {
		t.Fatal("an audit that reads sent no request: the test would not tell reading from replaying")
	}

	changed := own.DeepCopy()
	changed.Annotations[string(annotation.LBType)] = "lb21"
	g.add(changed, late)
	g.emu.ResetRequests()
	plans, again, err := g.lbs.AuditPlansFrom(context.Background(), clusterName, g.nodes, noDenials, reads)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.emu.Requests(); len(got) != 0 {
		t.Errorf("AuditPlansFrom(earlier reads) sent %d requests, want 0: %v", len(got), g.emu.Counts())
	}
	if again != reads {
		t.Error("AuditPlansFrom(earlier reads) returned other reads, want the earlier ones")
	}
	byName := map[string]loadbalancer.AuditPlan{}
	for _, p := range plans {
		byName[p.Service.Name] = p
	}
	for _, name := range []string{"own", "a", "b"} {
		if p, ok := byName[name]; !ok || p.Err != nil {
			t.Errorf("plan of %s = %v, %v; want one without error", name, ok, p.Err)
		}
	}
	if typ := byName["own"].Plan.Steps()[0].LoadBalancer.Type; typ != "lb21" {
		t.Errorf("plan of own creates a %s, want the lb21 the Service asks for now", typ)
	}
	if p := byName["late"]; !errors.Is(p.Err, loadbalancer.ErrNotRead) {
		t.Errorf("plan of late: Err = %v, want ErrNotRead", p.Err)
	}
}

// TestAuditPlans_SkipsRefusedMembers (issue 42 §4): a member whose listener the gate refused
// has nothing on the group's load balancer: the audit gives it no plan (its PolicyDenied
// reports it, not a PolicyViolation too), and still plans the members the load balancer serves.
func TestAuditPlans_SkipsRefusedMembers(t *testing.T) {
	g := newGroupEnv(t)
	a, b, c := groupMember("a", 0, "web", []int32{80}), groupMember("b", 1, "web", []int32{81}), groupMember("c", 2, "web", []int32{82})
	g.add(a, b)
	g.mustEnsure(a)
	g.mustEnsure(b)
	g.add(c) // joins the group after its load balancer exists
	g.decider.denyIf = func(in input.Input) string {
		if in.Listener != nil && in.Listener.ListenPort == 82 {
			return "port 82 is not allowed"
		}
		return ""
	}
	if _, err := g.ensure(c); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("EnsureLoadBalancer(c) = %v, want a denial; listeners %v", err, listenPortsOf(g.onlyLB()))
	}
	g.decider.denyIf = nil
	plans, err := g.lbs.AuditPlans(context.Background(), clusterName, g.nodes, noDenials)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plans {
		if p.Err != nil {
			t.Errorf("plan of %s: %v", p.Service.Name, p.Err)
		}
		got = append(got, p.Service.Name)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("audit plans of %v, want a and b (c's listener was refused)", got)
	}
}
