package lbgroup

import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	corev1 "k8s.io/api/core/v1"
	"maps"
	"slices"
)

// DeniedSteps decides every step of plan as the CCM's gate decides it, for the member whose sync
// plans (its Service is the policy input's service), and returns the indices, in plan.Steps()
// order, of the steps the policy denies; nil when it allows them all. It is how PlanGroup asks
// for a decision without deciding itself: the CCM passes its executor's
// (gate.Gate.DeniedSteps), `plan` (ccm/ciplan) and the admission webhook (ccm/admission)
// one over their decider, with the same gate.Inputs.
type DeniedSteps func(plan lbplan.Plan) []int

// GroupInput is what PlanGroup plans the load balancer of a group from.
type GroupInput struct {
	// Group is the group's name, Home its home namespace (GroupHome).
	Group, Home string
	// Name and Labels are the load balancer's name and labels (GroupDesiredLabels).
	Name   string
	Labels map[string]string
	// Acting is the namespace/name (Key) of the member whose sync plans.
	Acting string
	// Members are the group's members, oldest first (GroupMembers), for input.group.
	Members []*corev1.Service
	// Leader is the leader's desired state, with the targets and every load-balancer-wide
	// setting in force.
	Leader lbplan.Desired
	// Lists are the listeners of every member with valid annotations, the leader's first
	// (LeaderFirst).
	Lists []MemberListeners
	// Type is the type in force, with its max_services (0: no limit).
	Type TypeLimit
	// Actual is the group's load balancer; nil for a create.
	Actual *lbplan.Actual
}

// GroupOutcome is the plan PlanGroup chose.
type GroupOutcome struct {
	Plan      lbplan.Plan
	Admission Admission
	// Left are the members left out of Plan because the policy denies their listeners, in the
	// order they were found; empty when none was.
	Left []string
}

// PlanGroup plans the load balancer of a group for the acting member: the members' listeners are
// admitted (AdmitGroup, in member order, up to the type's max_services), the leader's desired
// state gets the group's name, labels and admitted listeners (GroupDesired), and Compute plans it
// against in.Actual; plan.Group is the policy view (GroupView). It is pure: denied is the only
// decision it asks for.
//
// With denied nil every member is planned (a plan that is only shown, not gated). With denied, a
// plan the policy denies only for steps of other members (listeners they hold) is planned again
// without those members, as if they were refused for capacity: they are out of the desired state
// and of input.group's ports, and their listeners are never added through the acting member's
// sync. This repeats until the plan is allowed or a denied step is the acting member's own (a
// target, a load-balancer-wide setting, its own listener, or one no member holds): then the plan
// with every member is returned, so its denial names every denied step. A denied create carries
// every admitted listener inline, so every other member among them is left out: the load
// balancer is created with the acting member's listeners, and each other member is added at its
// own sync, where its own steps are decided alone.
//
// Finding the members at fault costs only decisions: one round per set of left-out members, and
// none when no step touches another member's listener. Each round leaves out at least one member,
// so it ends. The CCM (ccm/loadbalancer), `plan` (ccm/ciplan) and the admission webhook
// (ccm/admission, through loadbalancer.Preview) all call it: one verdict. TestPlanGroup states the
// rules.
//
// # Errors
//
// Compute's (bad input, e.g. neither location nor network zone for a create).
func PlanGroup(in GroupInput, denied DeniedSteps) (GroupOutcome, error) {
	left := map[string]bool{}
	var first GroupOutcome // the plan with every member: what a denial of the acting member's own step reports
	var out GroupOutcome
	for round := 0; ; round++ {
		kept := slices.DeleteFunc(slices.Clone(in.Lists), func(m MemberListeners) bool { return left[m.Member] })
		adm := AdmitGroup(kept, in.Type.MaxServices)
		plan, err := lbplan.Compute(GroupDesired(in.Leader, adm, in.Name, maps.Clone(in.Labels)), in.Actual)
		if err != nil {
			return GroupOutcome{}, err
		}
		plan.Group = GroupView(in.Group, in.Home, in.Members, adm, in.Type)
		out.Plan, out.Admission = plan, adm
		if denied == nil {
			return out, nil
		}
		if round == 0 {
			first = GroupOutcome{Plan: plan, Admission: adm}
		}
		blamed, own := blameOthers(in.Acting, plan, adm, denied)
		switch {
		case own:
			return first, nil
		case len(blamed) == 0:
			return out, nil
		}
		for _, m := range blamed {
			left[m] = true
			out.Left = append(out.Left, m)
		}
	}
}

// blameOthers returns the members other than acting whose listener steps alone deny plan. It
// returns none when no step touches a listener of another member (no decision is asked for then)
// or when the policy allows the plan, and own when a denied step touches no other member's
// listener. A create's step touches the listeners that ride along in it.
func blameOthers(acting string, plan lbplan.Plan, adm Admission, denied DeniedSteps) (blamed []string, own bool) {
	owner := map[int]string{}
	for m, ports := range adm.Ports {
		for _, p := range ports {
			owner[p] = m
		}
	}
	steps := plan.Steps()
	others := make([][]string, len(steps)) // per step: the other members it touches a listener of
	touches := false
	for i, st := range steps {
		for _, p := range stepListenPorts(st) {
			if o := owner[p]; o != "" && o != acting && !slices.Contains(others[i], o) {
				others[i] = append(others[i], o)
				touches = true
			}
		}
	}
	if !touches {
		return nil, false
	}
	for _, i := range denied(plan) {
		if i < 0 || i >= len(others) || len(others[i]) == 0 {
			return nil, true
		}
		for _, o := range others[i] {
			if !slices.Contains(blamed, o) {
				blamed = append(blamed, o)
			}
		}
	}
	return blamed, false
}

// stepListenPorts are the listen ports of the listeners st adds, changes or removes: a create's
// inline listeners, else its one listener.
func stepListenPorts(st lbplan.Step) []int {
	if st.Mutation.Operation() == lbplan.OpCreate {
		var ports []int
		for _, m := range st.Inline {
			if a, ok := m.(lbplan.AddService); ok {
				ports = append(ports, a.Listener.ListenPort)
			}
		}
		return ports
	}
	if st.Listener != nil {
		return []int{st.Listener.ListenPort}
	}
	return nil
}
