package executor_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

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
	has443 := func(lb *policy.LoadBalancer) bool {
		return slices.ContainsFunc(lb.Services, func(s policy.LBService) bool { return s.ListenPort == 443 })
	}
	decisions := 0
	decide := func(_ context.Context, in policy.Input) policy.Decision {
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
	v := executor.Decide(context.Background(), plan, policy.Cluster{}, nil, decide)
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
	v := executor.Decide(context.Background(), plan, policy.Cluster{}, nil, func(context.Context, policy.Input) policy.Decision {
		decisions++
		return policy.Decision{Allowed: true}
	})
	if decisions != 2 || v.Denied() || !slices.Equal(v.Run.Labels(), plan.Labels()) {
		t.Errorf("%d decisions, denied %t, runs %v; want 2, false, %v", decisions, v.Denied(), v.Run.Labels(), plan.Labels())
	}
}

// TestRun_DryRunDeniedNamesItsDecision: a PolicyDryRunDenied event names the decision ID of
// each step, as a PolicyDenied event does, so that kubectl leads to the decision log line.
func TestRun_DryRunDeniedNamesItsDecision(t *testing.T) {
	t.Parallel()
	ev := newEnv(t, func(in policy.Input) policy.Decision {
		return policy.Decision{ID: "id-" + in.Operation, Allowed: true, DryRun: true, Deny: []policy.Message{{Msg: "would not pass", Code: "W1"}}}
	})
	svc := newService()
	if _, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, ev.bareLB(t))); err != nil {
		t.Fatal(err)
	}
	const want = "Warning PolicyDryRunDenied would be denied (dry run): would not pass (W1): for add_service(80) (decision id-add_service), " +
		"add_target(server:1) (decision id-add_target), add_target(server:2) (decision id-add_target)"
	if events := ev.events(); count(events, want) != 1 {
		t.Errorf("events = %q, want one %q", events, want)
	}
}

// TestRunDetached_StepsFailAlone: a node sync's target plan with one target denied is not
// detached: the other target is added before RunDetached returns, the denial comes back with
// the state the API holds, and nothing fails in the background.
func TestRunDetached_StepsFailAlone(t *testing.T) {
	t.Parallel()
	var ev *env
	ev = newEnv(t, func(in policy.Input) policy.Decision {
		if in.Target != nil && in.Target.ServerID == ev.servers[0] {
			return policy.Decision{Deny: []policy.Message{{Msg: "not this node"}}}
		}
		return policy.Decision{Allowed: true}
	})
	svc, lb := ev.serviceLB(t, 1)
	plan := lbplan.Plan{Actual: lbplan.NewActual(lb), Mutations: []lbplan.Mutation{
		lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], Node: "node-1"}},
		lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[1], Node: "node-2"}},
	}}
	if !executor.Detachable(plan) {
		t.Fatal("the target plan is not detachable")
	}
	state, err := ev.exec.RunDetached(context.Background(), svc, plan, func(err error) {
		t.Errorf("the background part failed: %v", err)
	})
	var denied *executor.DeniedError
	if !errors.As(err, &denied) || len(denied.Applied) != 1 {
		t.Fatalf("err = %v, want a denial with one step applied", err)
	}
	if got := ev.targetIDs(t, lb.ID); !slices.Equal(got, ev.servers[1:]) {
		t.Errorf("targets %v when RunDetached returned, want %v", got, ev.servers[1:])
	}
	if state == nil || len(state.Targets) != 1 || state.Targets[0].ServerID != ev.servers[1] {
		t.Errorf("state %+v, want the one target added", state)
	}
	if err := ev.exec.Settle(context.Background(), svc.UID); err != nil {
		t.Fatal(err)
	}
}
