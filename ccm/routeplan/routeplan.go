// Package routeplan plans the changes of a private network's routes, as ccm/lbplan plans load
// balancers: a pure function from the routes the network has to an ordered list of typed
// mutations (add_route, delete_route) that the executor decides as a whole, before the first
// one runs, and then runs in order, each as the API request its Request returns. It imports
// no client, and takes the policy input types from policy/input, not from the engine
// (TestPlannersAreLight in ccm/lbplan).
//
// A route whose gateway changes is one plan of two mutations (delete the old route, add the
// new one): when the policy denies either, neither runs and the old route stays.
package routeplan

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// The operations, as in input.Input.Operation. They MUST not change: policies and metrics
// match on them.
const (
	OpAddRoute    = "add_route"
	OpDeleteRoute = "delete_route"
)

// Route is a route of the network: traffic to Destination goes to Gateway.
type Route struct {
	Destination netip.Prefix
	Gateway     netip.Addr
}

// String is "<destination> via <gateway>".
func (r Route) String() string { return r.Destination.String() + " via " + r.Gateway.String() }

// Mutation is one change of the network's routes, run by the executor with one API call.
//
// Action is the policy action (input.ActionRoute*), Operation the Hetzner operation (also the
// policy input's operation and the metric label), Label a stable human label such as
// add_route(10.244.1.0/24 via 10.0.0.2) used in logs, events and errors. Apply returns the
// routes after the mutation, the one model of its effect (the routes cache uses it after a
// successful run); it is pure and never modifies its argument. Request is the API request
// that runs it on the network networkID (the executor sends exactly it; the compiler requires
// every kind to have one).
type Mutation interface {
	Action() string
	Operation() string
	Label() string
	Route() Route
	Apply(routes []Route) []Route
	Request(networkID int64) apireq.Request
}

// kinds are the route mutation kinds, one value each: the policy contract's operations are
// generated from them (policy/internal/gendoc). A test fails for a kind missing here. Unexported:
// nothing outside this package can add one (Kinds hands out a copy).
var kinds = []Mutation{Add{}, Delete{}}

// Kinds returns a copy of the route mutation kinds, one value each.
func Kinds() []Mutation { return slices.Clone(kinds) }

// Add adds the route. Its Apply leaves routes that already hold it as they are (the network
// holds a route once), so applying it twice is applying it once.
type Add Route

func (Add) Action() string    { return input.ActionRouteCreate }
func (Add) Operation() string { return OpAddRoute }
func (m Add) Label() string   { return fmt.Sprintf("%s(%s)", OpAddRoute, Route(m)) }
func (m Add) Route() Route    { return Route(m) }
func (m Add) Apply(routes []Route) []Route {
	if slices.Contains(routes, Route(m)) {
		return slices.Clone(routes)
	}
	return append(slices.Clone(routes), Route(m))
}

// Request is POST /networks/{id}/actions/add_route, as hcloud-go's AddRoute sends it.
func (m Add) Request(networkID int64) apireq.Request {
	return apireq.Post(apireq.PathNetworkActions+OpAddRoute, networkID, Route(m).body())
}

// Delete deletes the route (destination and gateway must both match, as in the API).
type Delete Route

func (Delete) Action() string    { return input.ActionRouteDelete }
func (Delete) Operation() string { return OpDeleteRoute }
func (m Delete) Label() string   { return fmt.Sprintf("%s(%s)", OpDeleteRoute, Route(m)) }
func (m Delete) Route() Route    { return Route(m) }
func (m Delete) Apply(routes []Route) []Route {
	return slices.DeleteFunc(slices.Clone(routes), func(r Route) bool { return r == Route(m) })
}

// Request is POST /networks/{id}/actions/delete_route, as hcloud-go's DeleteRoute sends it. A
// route that is already gone (not_found) counts as deleted.
func (m Delete) Request(networkID int64) apireq.Request {
	req := apireq.Post(apireq.PathNetworkActions+OpDeleteRoute, networkID, schema.NetworkActionDeleteRouteRequest(Route(m).body()))
	req.Outcomes = []apireq.Outcome{{Code: hcloud.ErrorCodeNotFound, Then: apireq.Done}}
	return req
}

// body is the route as the add_route and delete_route bodies hold it: the strings of
// hcloud-go's net.IPNet and net.IP, as its AddRoute and DeleteRoute format them.
func (r Route) body() schema.NetworkActionAddRouteRequest {
	dest := net.IPNet{IP: r.Destination.Addr().AsSlice(), Mask: net.CIDRMask(r.Destination.Bits(), r.Destination.Addr().BitLen())}
	return schema.NetworkActionAddRouteRequest{Destination: dest.String(), Gateway: net.IP(r.Gateway.AsSlice()).String()}
}

// Plan is the ordered mutations for the routes of one node.
type Plan struct {
	// Node is the name of the node the plan is for: the policy input's route.node and the
	// object of the plan's events. Empty for a route that leads to no node (a blackhole).
	Node      string
	Mutations []Mutation
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Mutations) == 0 }

// Labels returns the mutations' labels, in order.
func (p Plan) Labels() []string {
	out := make([]string, len(p.Mutations))
	for i, m := range p.Mutations {
		out[i] = m.Label()
	}
	return out
}

// Apply returns routes after every mutation of the plan, in order. routes is not modified: each
// mutation's Apply returns a new slice, so only an empty plan copies here.
func (p Plan) Apply(routes []Route) []Route {
	if len(p.Mutations) == 0 {
		return slices.Clone(routes)
	}
	out := routes
	for _, m := range p.Mutations {
		out = m.Apply(out)
	}
	return out
}

// Ensure plans the route want for node, given the routes the network has (CreateRoute's
// upsert, as in the official CCM): nothing when the same route exists; add it when no route
// has its destination; when routes to the same destination go through other gateways, delete
// each and then add it, in one plan (decided as a whole, so a denied add keeps the old route).
func Ensure(have []Route, want Route, node string) Plan {
	p := Plan{Node: node}
	for _, r := range have {
		if r.Destination != want.Destination {
			continue
		}
		if r.Gateway == want.Gateway {
			return Plan{Node: node}
		}
		p.Mutations = append(p.Mutations, Delete(r))
	}
	p.Mutations = append(p.Mutations, Add(want))
	return p
}

// Remove plans the deletion of every route to destination (the network holds at most one;
// DeleteRoute), for node (the route's target, empty for a blackhole). Nothing when there is
// none.
func Remove(have []Route, destination netip.Prefix, node string) Plan {
	p := Plan{Node: node}
	for _, r := range have {
		if r.Destination == destination {
			p.Mutations = append(p.Mutations, Delete(r))
		}
	}
	return p
}
