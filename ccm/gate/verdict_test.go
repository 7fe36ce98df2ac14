package gate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const uid = "uid-1"

// TestDecide_DecidesAgainWhatRuns: the steps left after a denial are decided again on the plan
// that runs, so no step that runs was allowed on a view that shows a skipped step's effect; a
// step denied only then is skipped too.
func TestDecide_DecidesAgainWhatRuns(t *testing.T) {
	t.Parallel()
	actual := &lbplan.Actual{ID: 7, Name: "web", Type: "lb11", MaxTargets: 25, MaxServices: 5, PublicInterface: true,
		Labels: map[string]string{lbplan.LabelServiceUID: uid}}
	l443 := lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: 443, DestinationPort: 30443}
	l80 := lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: 80, DestinationPort: 30080}
	plan := lbplan.Plan{Actual: actual, Mutations: []lbplan.Mutation{
		lbplan.AddService{Listener: l443}, lbplan.AddService{Listener: l80},
		lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}, lbplan.AddTarget{Target: lbplan.Target{ServerID: 4}},
	}}
	has443 := func(lb *input.LoadBalancer) bool {
		return slices.ContainsFunc(lb.Services, func(s input.LBService) bool { return s.ListenPort == 443 })
	}
	decisions := 0
	decide := func(_ context.Context, in input.Input) policy.Decision {
		decisions++
		switch {
		case in.Listener != nil && in.Listener.ListenPort == 443:
			return policy.Decision{Deny: []policy.Message{{Msg: "no 443"}}}
		case in.Target != nil && in.Target.ServerID == 4 && !has443(in.Final):
			// allowed only when the final state has the 443 listener
			return policy.Decision{Deny: []policy.Message{{Msg: "server 4 only behind 443"}}}
		}
		return policy.Decision{Allowed: true}
	}
	v := gate.Gate{Decider: policy.DecideFunc(decide)}.Decide(context.Background(), plan, nil)
	if got, want := v.Run.Labels(), []string{"add_service(80)", "add_target(server:3)"}; !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if decisions != 4+3+2 {
		t.Errorf("%d decisions, want 4 for the plan, 3 for the steps left after 443, 2 after server 4", decisions)
	}
	if len(v.Steps) != 4 {
		t.Fatalf("%d step verdicts, want one per step of the plan", len(v.Steps))
	}
	for i, st := range v.Steps {
		wantRuns := i == 1 || i == 2
		if st.Runs != wantRuns || st.Denied() == wantRuns {
			t.Errorf("step %s: runs %t, denied %t; want runs %t", st.Label, st.Runs, st.Denied(), wantRuns)
		}
		if st.Runs && (has443(st.Input.LoadBalancer) || has443(st.Input.Final)) {
			t.Errorf("step %s runs on a view with the skipped listener 443", st.Label)
		}
	}
}

// TestDecide_NothingDenied decides each step once and runs the whole plan.
func TestDecide_NothingDenied(t *testing.T) {
	t.Parallel()
	plan := lbplan.Plan{Actual: &lbplan.Actual{ID: 7, Name: "web", PublicInterface: true}, Mutations: []lbplan.Mutation{
		lbplan.AddTarget{Target: lbplan.Target{ServerID: 3}}, lbplan.RemoveTarget{Target: lbplan.Target{ServerID: 4}},
	}}
	decisions := 0
	v := gate.Gate{Decider: policy.DecideFunc(func(context.Context, input.Input) policy.Decision {
		decisions++
		return policy.Decision{Allowed: true}
	})}.Decide(context.Background(), plan, nil)
	if decisions != 2 || v.Denied() || !slices.Equal(v.Run.Labels(), plan.Labels()) {
		t.Errorf("%d decisions, denied %t, runs %v; want 2, false, %v", decisions, v.Denied(), v.Run.Labels(), plan.Labels())
	}
}
