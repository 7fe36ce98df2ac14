package executor_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// spoofedAddTarget is the first way past the gate of issue 30: it embeds lbplan.AddTarget, so
// it says it is loadbalancer.update/add_target, but its request deletes the load balancer.
type spoofedAddTarget struct{ lbplan.AddTarget }

func (spoofedAddTarget) Request(a *lbplan.Actual, _ int64) (apireq.Request, error) {
	return apireq.Request{Method: "DELETE", Path: apireq.Fill(apireq.PathLoadBalancer, a.ID), Wait: true}, nil
}

// spoofedAddRoute says it is route.create/add_route and deletes the route instead.
type spoofedAddRoute struct{ routeplan.Add }

func (m spoofedAddRoute) Request(networkID int64) apireq.Request {
	return routeplan.Delete(m.Add).Request(networkID)
}

// denyDeletes denies every delete, of load balancers and routes, and allows the rest.
func denyDeletes(in input.Input) policy.Decision {
	if in.Action == input.ActionLoadBalancerDelete || in.Action == input.ActionRouteDelete {
		return policy.Decision{Deny: []policy.Message{{Msg: "no deletes"}}}
	}
	return policy.Decision{Allowed: true}
}

// TestRun_RefusesSpoofedMutations: a mutation whose exact type is not a registered kind is
// refused before anything is decided or sent, whatever it says it is (issue 30: a type that
// embeds lbplan.AddTarget and sends DELETE /load_balancers/{id} was allowed as add_target by a
// policy that denies deletes, and the load balancer was gone). Run, RunDetached and RunRoutes
// all refuse; the load balancer and the route survive.
func TestRun_RefusesSpoofedMutations(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(ev *env, plan lbplan.Plan) error
		m    lbplan.Mutation
	}{
		{"Run, a type that embeds a kind", func(ev *env, plan lbplan.Plan) error {
			_, err := ev.exec.Run(ctx, newService(), plan)
			return err
		}, spoofedAddTarget{}},
		{"RunDetached, a type that embeds a kind (its plan looks detachable)", func(ev *env, plan lbplan.Plan) error {
			_, err := ev.exec.RunDetached(ctx, newService(), plan, nil)
			return err
		}, spoofedAddTarget{}},
		{"Run, a pointer to a kind", func(ev *env, plan lbplan.Plan) error {
			_, err := ev.exec.Run(ctx, newService(), plan)
			return err
		}, &lbplan.AddTarget{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, denyDeletes)
			lb := ev.bareLB(t)
			plan := lbplan.Plan{Actual: lbplan.NewActual(lb), Mutations: []lbplan.Mutation{tc.m}}
			ev.emu.ResetRequests()
			err := tc.run(ev, plan)
			if !errors.Is(err, executor.ErrRefused) || !strings.Contains(err.Error(), "is not a registered kind") {
				t.Errorf("err = %v, want a refusal naming the unregistered kind", err)
			}
			if _, ok := ev.emu.LoadBalancer(lb.ID); !ok {
				t.Error("the load balancer is gone")
			}
			if n := ev.emu.MutatingRequests(); n != 0 {
				t.Errorf("%d mutating requests, want none: %v", n, ev.emu.Counts())
			}
			if n := len(ev.decider.inputs); n != 0 {
				t.Errorf("%d decisions, want none: a refused plan is not decided", n)
			}
		})
	}

	t.Run("RunRoutes, a type that embeds a kind", func(t *testing.T) {
		ev := newEnv(t, denyDeletes)
		r := routeplan.Route{Destination: netip.MustParsePrefix("10.244.1.0/24"), Gateway: netip.MustParseAddr("10.0.0.11")}
		if err := ev.exec.AddRoute(ctx, ev.network, route("10.244.1.0/24", "10.0.0.11"), "node-1"); err != nil {
			t.Fatal(err)
		}
		ev.emu.ResetRequests()
		err := ev.exec.RunRoutes(ctx, ev.network, routeplan.Plan{Node: "node-1", Mutations: []routeplan.Mutation{spoofedAddRoute{routeplan.Add(r)}}})
		if !errors.Is(err, executor.ErrRefused) {
			t.Errorf("err = %v, want a refusal", err)
		}
		if n, _ := ev.emu.Network(ev.network.ID); len(n.Routes) != 1 {
			t.Errorf("routes = %+v, want the route kept", n.Routes)
		}
		if n := ev.emu.MutatingRequests(); n != 0 {
			t.Errorf("%d mutating requests, want none", n)
		}
	})
}
