package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/klog/v2"

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
	items := make([]gateItem, 0, len(plan.Mutations))
	for _, m := range plan.Mutations {
		r := m.Route()
		items = append(items, gateItem{label: m.Label(), input: policy.Input{
			Version: policy.InputVersion, Action: m.Action(), Operation: m.Operation(), Cluster: x.cluster,
			Route: &policy.Route{Destination: r.Destination.String(), Gateway: r.Gateway.String(), Node: plan.Node},
		}})
	}
	if err := x.decideAll(ctx, nodeRef(plan.Node), items); err != nil {
		return err
	}
	for _, m := range plan.Mutations {
		klog.InfoS("executing", "op", m.Label(), "network", network.ID, "node", plan.Node)
		if err := x.runRoute(ctx, network, m); err != nil {
			countMutation(m.Action(), m.Operation(), resultError)
			return wrapAPIError(m.Label(), err)
		}
		countMutation(m.Action(), m.Operation(), resultSuccess)
	}
	return nil
}

// routeKinds is the table of route mutation kinds, as kinds is for load balancers: how each
// becomes a request. Every route request's action is awaited with the shared waiter; the state
// after it is the kind's routeplan Apply (the routes cache applies it).
var routeKinds = map[reflect.Type]func(ctx context.Context, x *Executor, network *hcloud.Network, route hcloud.NetworkRoute) (*hcloud.Action, error){
	reflect.TypeFor[routeplan.Add](): func(ctx context.Context, x *Executor, network *hcloud.Network, route hcloud.NetworkRoute) (*hcloud.Action, error) {
		a, _, err := x.client.Network.AddRoute(ctx, network, hcloud.NetworkAddRouteOpts{Route: route})
		return a, err
	},
	// A route that is already gone (not_found) counts as deleted.
	reflect.TypeFor[routeplan.Delete](): func(ctx context.Context, x *Executor, network *hcloud.Network, route hcloud.NetworkRoute) (*hcloud.Action, error) {
		a, _, err := x.client.Network.DeleteRoute(ctx, network, hcloud.NetworkDeleteRouteOpts{Route: route})
		if hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
			return nil, nil
		}
		return a, err
	},
}

// runRoute sends one route mutation with its table entry and waits for its action.
func (x *Executor) runRoute(ctx context.Context, network *hcloud.Network, m routeplan.Mutation) error {
	send, ok := routeKinds[reflect.TypeOf(m)]
	if !ok {
		return fmt.Errorf("no executor table entry for route mutation %T", m)
	}
	a, err := send(ctx, x, network, networkRoute(m.Route()))
	if err != nil {
		return err
	}
	return x.actions.wait(ctx, x.client, a)
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

// networkRoute converts a planned route to hcloud-go's.
func networkRoute(r routeplan.Route) hcloud.NetworkRoute {
	return hcloud.NetworkRoute{
		Destination: &net.IPNet{IP: r.Destination.Addr().AsSlice(), Mask: net.CIDRMask(r.Destination.Bits(), r.Destination.Addr().BitLen())},
		Gateway:     r.Gateway.AsSlice(),
	}
}
