package executor_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestRun_DryRunDeniedNamesItsDecision: a PolicyDryRunDenied event names the decision ID of
// each step, as a PolicyDenied event does, so that kubectl leads to the decision log line.
func TestRun_DryRunDeniedNamesItsDecision(t *testing.T) {
	t.Parallel()
	ev := newEnv(t, func(in input.Input) policy.Decision {
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
	ev = newEnv(t, func(in input.Input) policy.Decision {
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
	var denied *gate.DeniedError
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

// TestSend_RefusesWhatTheGateDidNotDecide: an executor.Decided that Decide did not make (the
// zero value: no other package can fill one) is refused and sends nothing.
func TestSend_RefusesWhatTheGateDidNotDecide(t *testing.T) {
	t.Parallel()
	ev := newEnv(t, func(input.Input) policy.Decision { return policy.Decision{Allowed: true} })
	_, err := ev.exec.Send(context.Background(), executor.Decided{})
	if !errors.Is(err, executor.ErrRefused) {
		t.Fatalf("Send(Decided{}) = %v, want ErrRefused", err)
	}
	if got := len(ev.emu.Requests()); got != 0 {
		t.Errorf("%d requests sent, want none", got)
	}
}
