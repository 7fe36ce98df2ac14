package executor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Route operations, as in policy.Input.Operation.
const (
	OpAddRoute    = routeplan.OpAddRoute
	OpDeleteRoute = routeplan.OpDeleteRoute
)

// RunRoutes decides every mutation of plan through the same gate as load balancer plans
// (actions route.create and route.delete, operations add_route and delete_route, the input's
// route {destination, gateway, node: plan.Node}) before the first one runs, then runs them in
// order on network, waiting for each action. Concurrent runs share their action polls (one
// GET /actions per 50 pending actions and round).
//
// Only what the policy decided is sent, as in Run: a mutation whose exact type is not a
// registered kind (routeplan.Kinds), or a request whose endpoint (apireq.Of) is not its
// mutation's action and operation or names another network than the one decided on (the
// input's cluster.network when the cluster has one, else network), is refused with an error
// wrapping ErrRefused.
//
// # Errors
//
// A denial of any mutation runs none of them (a gateway change denied on its add keeps the old
// route), puts one Warning event PolicyDenied on the plan's Node and returns an error wrapping
// policy.ErrDenied. A failed request stops the run; its error is prefixed with the mutation's
// label, and locked or conflict (another change runs on the network) gives a wrapped
// *api.RetryError. A delete_route of a route that is already gone (not_found) counts as done.
func (x *Executor) RunRoutes(ctx context.Context, network *hcloud.Network, plan routeplan.Plan) error {
	if network == nil {
		return errors.New("run routes: no network")
	}
	if plan.Empty() {
		return nil
	}
	if err := vetKinds(plan.Mutations); err != nil {
		return err
	}
	decided := network.ID
	if x.cluster.Network != nil {
		decided = x.cluster.Network.ID
	}
	steps := RouteInputs(plan, x.cluster)
	items := make([]gateItem, 0, len(steps))
	for _, st := range steps {
		items = append(items, gateItem{label: st.Label, input: st.Input})
	}
	if err := x.decideAll(ctx, nodeRef(plan.Node), items); err != nil {
		return err
	}
	for _, m := range plan.Mutations {
		klog.InfoS("executing", "op", m.Label(), "network", network.ID, "node", plan.Node)
		api := m.Request(network.ID)
		if err := vetRequest(m, api, decided); err != nil {
			return err // logged and counted as refused
		}
		if err := x.runRoute(ctx, plan.Node, m, api); err != nil {
			countMutation(m.Action(), m.Operation(), resultError)
			return wrapAPIError(m.Label(), err)
		}
		countMutation(m.Action(), m.Operation(), resultSuccess)
	}
	return nil
}

// RouteInputs returns the policy input of every mutation of plan in cluster, in order. It is
// pure; the gate of RunRoutes decides exactly these inputs, and the policy audit (ccm/audit)
// judges an existing route by the input of its add_route.
func RouteInputs(plan routeplan.Plan, cluster policy.Cluster) []StepInput {
	out := make([]StepInput, 0, len(plan.Mutations))
	for _, m := range plan.Mutations {
		r := m.Route()
		out = append(out, StepInput{Label: m.Label(), Input: policy.Input{
			Version: policy.InputVersion, Action: m.Action(), Operation: m.Operation(), Cluster: cluster,
			Route: &policy.Route{Destination: r.Destination.String(), Gateway: r.Gateway.String(), Node: plan.Node},
		}})
	}
	return out
}

// runRoute sends api, the request of m, and waits for its action with the shared waiter; a
// declared outcome Done (not_found of a delete) counts as done.
func (x *Executor) runRoute(ctx context.Context, node string, m routeplan.Mutation, api apireq.Request) error {
	req, err := x.newRequest(ctx, api)
	if err != nil {
		return err
	}
	var ans reply
	_, err = x.client.Do(req, &ans)
	if o, ok := api.On(err); ok {
		x.report(nodeRef(node), o, m.Label(), "")
		switch o.Then {
		case apireq.Done, apireq.Skipped:
			return nil
		case apireq.Fail:
			if o.Err != nil {
				err = o.Err.Because(err)
			}
		}
	}
	if err != nil || !api.Wait || ans.Action == nil {
		return err
	}
	return x.actions.wait(ctx, x.client, hcloud.ActionFromSchema(*ans.Action))
}

// AddRoute runs a plan of one add_route for nodeName (see RunRoutes).
func (x *Executor) AddRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error {
	r, err := planRoute(route)
	if err != nil {
		return fmt.Errorf("%s: %w", OpAddRoute, err)
	}
	return x.RunRoutes(ctx, network, routeplan.Plan{Node: nodeName, Mutations: []routeplan.Mutation{routeplan.Add(r)}})
}

// DeleteRoute runs a plan of one delete_route for nodeName (see RunRoutes).
func (x *Executor) DeleteRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error {
	r, err := planRoute(route)
	if err != nil {
		return fmt.Errorf("%s: %w", OpDeleteRoute, err)
	}
	return x.RunRoutes(ctx, network, routeplan.Plan{Node: nodeName, Mutations: []routeplan.Mutation{routeplan.Delete(r)}})
}

// planRoute converts an hcloud-go route to the planner's.
func planRoute(route hcloud.NetworkRoute) (routeplan.Route, error) {
	if route.Destination == nil || route.Gateway == nil {
		return routeplan.Route{}, errors.New("destination and gateway are required")
	}
	ones, _ := route.Destination.Mask.Size()
	dest, ok := netip.AddrFromSlice(route.Destination.IP)
	gw, gwOK := netip.AddrFromSlice(route.Gateway)
	if !ok || !gwOK {
		return routeplan.Route{}, fmt.Errorf("invalid route %s via %s", route.Destination, route.Gateway)
	}
	return routeplan.Route{Destination: netip.PrefixFrom(dest.Unmap(), ones).Masked(), Gateway: gw.Unmap()}, nil
}
