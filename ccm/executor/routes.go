package executor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
)

// Route operations, as in input.Input.Operation.
const (
	OpAddRoute    = routeplan.OpAddRoute
	OpDeleteRoute = routeplan.OpDeleteRoute
)

// RunRoutes decides every mutation of plan through the same gate as load balancer plans
// (actions route.create and route.delete, operations add_route and delete_route, the input's
// route {destination, gateway, node: plan.Node}) before the first one runs, then runs them in
// order on network with send, the interpreter of load balancer requests too, waiting for each
// action. Concurrent runs share their action polls (one GET /actions per 50 pending actions
// and round).
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
	if n := x.gate.Cluster.Network; n != nil {
		decided = n.ID
	}
	if err := x.decideAll(ctx, nodeRef(plan.Node), gate.RouteInputs(plan, x.gate.Cluster)); err != nil {
		return err
	}
	r := &routeRun{network: network.ID, decidedID: decided, node: plan.Node}
	for _, m := range plan.Mutations {
		if _, err := send(ctx, x, r, m, x.waitShared); err != nil {
			return err
		}
	}
	return nil
}

// routeRun is the run of a route plan on a network for send: a route write has no
// answer to read and no state to carry to the next request.
type routeRun struct {
	network   int64 // the network the requests name
	decidedID int64 // the network the policy decided on (RunRoutes)
	node      string
}

func (r *routeRun) build(m routeplan.Mutation) ([]step, apireq.Request, error) {
	return []step{m}, m.Request(r.network), nil
}

func (r *routeRun) decided() int64 { return r.decidedID }

func (r *routeRun) object() runtime.Object { return nodeRef(r.node) }

func (r *routeRun) name() string { return "" }

func (r *routeRun) logKeys() []any { return []any{"network", r.network, "node", r.node} }

func (r *routeRun) advance(routeplan.Mutation, apireq.Answer, apireq.Result, reply) error {
	return nil
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
