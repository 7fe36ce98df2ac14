// Package routes implements cloudprovider.Routes for a Hetzner Cloud private network: each
// node's PodCIDR becomes a network route whose gateway is the node's server IP in the
// network, as in the official hcloud-cloud-controller-manager. Changes are planned by
// ccm/routeplan and run by a Runner (the executor, which decides the whole plan at the policy
// gate before its first write).
//
// API cost: one read of the network serves every route decision within NetworkMaxAge
// (concurrent reads are coalesced into one GET /networks/{id}); the CCM's own successful writes
// update the cached copy, so a route reconcile that finds nothing changed costs no request, and
// creating a route costs its add_route plus a share of the executor's batched action polls.
package routes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/cache"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// EventClusterCIDRMisconfigured is the reason of the Warning event on a Node whose PodCIDR
// lies outside the cluster CIDR (same reason as the official CCM; do not rename).
const EventClusterCIDRMisconfigured = "ClusterCIDRMisconfigured"

// DefaultNetworkMaxAge is how long a read of the network serves ListRoutes, CreateRoute and
// DeleteRoute. The route controller reconciles at most every 10 s (and, watch-based, only on
// node changes), so within this window a reconcile that finds nothing changed costs no request.
// A route changed by someone else is seen at the latest after this window; a write that the
// API refuses because of such a change reads the network again at once.
const DefaultNetworkMaxAge = 30 * time.Second

// Runner runs route plans; it is the only code that changes the network (the executor). It
// decides the whole plan before the first write; its errors are returned upstream wrapped (a
// policy denial wraps policy.ErrDenied and means nothing ran).
type Runner interface {
	RunRoutes(ctx context.Context, network *hcloud.Network, plan routeplan.Plan) error
}

// Options configure [New].
type Options struct {
	// Networks reads the network (hcloudclient.Conn.Networks). It has no write method: routes
	// never write (see Runner).
	Networks *hcloudclient.NetworkReader
	// Network is HCLOUD_NETWORK, already resolved (its ID is what counts; it is read again).
	Network *hcloud.Network
	// ClusterCIDR is --cluster-cidr: one CIDR or a comma-separated dual-stack pair. PodCIDRs
	// outside its IPv4 CIDR raise a Warning event. Empty is allowed: upstream runs the route
	// controller only with a cluster CIDR, and HCLOUD_NETWORK alone must not stop the CCM.
	ClusterCIDR string
	// Servers maps route gateways to servers and nodes to gateways.
	Servers *servercache.Cache
	// Runner runs route plans.
	Runner Runner
	// Nodes finds the node of a route.
	Nodes corelisters.NodeLister
	// Recorder receives Warning events; nil drops them.
	Recorder record.EventRecorder
	// NetworkMaxAge is how long a read of the network is reused; 0 means DefaultNetworkMaxAge.
	NetworkMaxAge time.Duration
}

// Routes implements [cloudprovider.Routes].
type Routes struct {
	o           Options
	clusterCIDR *net.IPNet // the IPv4 cluster CIDR; nil for none
	// network is the network's routes as last read plus our own writes since (Update, also
	// applied to a read in flight, which may predate them): read again after NetworkMaxAge,
	// by one request shared with every concurrent caller.
	network *cache.Cache[[]routeplan.Route]
}

var _ cloudprovider.Routes = (*Routes)(nil)

// New returns Routes for o.Network. It makes no request: the first lookup reads the network.
//
// # Errors
//
// A missing network reader, network, server cache, runner or node lister, or a cluster CIDR
// that does not parse.
func New(o Options) (*Routes, error) {
	const op = "routes.New"
	var errs []error
	if o.Networks == nil || o.Network == nil || o.Servers == nil || o.Runner == nil || o.Nodes == nil {
		errs = append(errs, errors.New("network reader, network, server cache, route runner and node lister are required"))
	}
	clusterCIDR, err := ipv4ClusterCIDR(o.ClusterCIDR)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	if o.NetworkMaxAge <= 0 {
		o.NetworkMaxAge = DefaultNetworkMaxAge
	}
	r := &Routes{o: o, clusterCIDR: clusterCIDR}
	r.network = cache.New(cache.Options[[]routeplan.Route]{Load: r.read, MaxAge: o.NetworkMaxAge})
	return r, nil
}

// ListRoutes lists the routes of the network. Each is named "<gateway>-<destination>" and
// targets the node named like the server that owns the gateway IP in the network; a route
// whose gateway belongs to no server is a blackhole (upstream deletes it if it lies in the
// cluster CIDR). Routes outside the cluster CIDR are listed too; upstream leaves them alone.
//
// Cost: nothing within NetworkMaxAge of the last read of the network and the server cache's
// max age of its last list; otherwise one GET /networks/{id} and one server list (shared with
// InstancesV2), each shared by concurrent callers.
func (r *Routes) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	const op = "routes.ListRoutes"
	compatmetrics.Operation(compatmetrics.OpListRoutes)
	routes, byIP, err := r.routesAndServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := make([]*cloudprovider.Route, 0, len(routes))
	for _, nr := range routes {
		route := &cloudprovider.Route{
			Name:            nr.Gateway.String() + "-" + nr.Destination.String(),
			DestinationCIDR: nr.Destination.String(),
		}
		if s, ok := byIP[nr.Gateway]; ok {
			route.TargetNode = types.NodeName(s.Name)
		} else {
			route.Blackhole = true
		}
		out = append(out, route)
	}
	return out, nil
}

// routesAndServers returns the network's routes (r.network) and the servers of the server
// cache by their private IP in the network.
func (r *Routes) routesAndServers(ctx context.Context) ([]routeplan.Route, map[netip.Addr]*hcloud.Server, error) {
	routes, _, err := r.network.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	servers, err := r.o.Servers.All(ctx)
	if err != nil {
		return nil, nil, err
	}
	byIP := make(map[netip.Addr]*hcloud.Server, len(servers))
	for _, s := range servers {
		if ip, ok := r.privateIP(s); ok {
			byIP[ip] = s
		}
	}
	return routes, byIP, nil
}

// AuditPlans returns, for every route of the network that leads to a node (as ListRoutes finds
// it: the network as last read, at most NetworkMaxAge old, and the server cache), the plan that
// would add it today: routeplan.Ensure against a network without it, for that node. The policy
// audit (ccm/audit) judges each by its add_route. Blackholes (a gateway of no server) are the
// route controller's to delete and are not judged. It never writes and costs what ListRoutes
// costs.
//
// # Errors
//
// The read of the network or of the servers, wrapped.
func (r *Routes) AuditPlans(ctx context.Context) ([]routeplan.Plan, error) {
	routes, byIP, err := r.routesAndServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit routes: %w", err)
	}
	out := make([]routeplan.Plan, 0, len(routes))
	for _, nr := range routes {
		if s, ok := byIP[nr.Gateway]; ok {
			out = append(out, routeplan.Ensure(nil, nr, s.Name))
		}
	}
	return out, nil
}

// CreateRoute makes the network route route.DestinationCIDR via the IP of route.TargetNode's
// server in the network. nameHint is ignored.
//
// It is an upsert planned by routeplan.Ensure against the network as last read (at most
// NetworkMaxAge old): an identical route costs no request; a route to the same destination
// through another gateway is replaced by one plan (delete it, add the new one) that the policy
// decides as a whole, so a denial keeps the old route. If the API refuses the write as
// invalid (the cached routes were stale), the network is read again and the plan made once
// more. IPv6 destinations are rejected before any API call (private networks route IPv4 only).
//
// The gateway is the server's IP in the network, from the server cache, and must be one of the
// InternalIPs of route.TargetNodeAddresses, as in the official CCM: a node without its InternalIP
// yet (not initialised) gets no route and an error naming that; the route controller retries,
// and with the watch-based route reconciliation the node's address update triggers it. A
// destination outside the cluster CIDR raises a Warning event ClusterCIDRMisconfigured on the
// node but is created.
//
// # Errors
//
// An unknown node or server, a server outside the network, a node without InternalIP, a
// gateway that is not among the node's InternalIPs, or a failed run (wrapped; a policy denial wraps policy.ErrDenied).
func (r *Routes) CreateRoute(ctx context.Context, _ string, _ string, route *cloudprovider.Route) error {
	const op = "routes.CreateRoute"
	compatmetrics.Operation(compatmetrics.OpCreateRoute)
	if route == nil {
		return fmt.Errorf("%s: nil route", op)
	}
	dest, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return fmt.Errorf("%s: invalid destination %q: expect an IPv4 CIDR", op, route.DestinationCIDR)
	}
	if !dest.Addr().Is4() {
		return fmt.Errorf("%s: destination %s is IPv6: Hetzner Cloud private networks route IPv4 only", op, route.DestinationCIDR)
	}
	dest = dest.Masked()
	nodeName := string(route.TargetNode)
	node, err := r.o.Nodes.Get(nodeName)
	if err != nil {
		return fmt.Errorf("%s: node %q: %w", op, nodeName, err)
	}
	gateway, err := r.gateway(ctx, node)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !hasInternalIP(route.TargetNodeAddresses) {
		return fmt.Errorf("%s: node %q has no InternalIP yet; its route via %s (the server's IP in network %d) is created once the node is initialised with it", op, nodeName, gateway, r.o.Network.ID)
	}
	if err := checkInternalIP(route.TargetNodeAddresses, gateway); err != nil {
		return fmt.Errorf("%s: gateway %s (the server's IP in network %d) %w: check the node's addresses and HCLOUD_NETWORK", op, gateway, r.o.Network.ID, err)
	}
	r.warnOutsideClusterCIDR(node, dest)

	want := routeplan.Route{Destination: dest, Gateway: gateway}
	err = r.ensure(ctx, want, nodeName)
	var apiErr hcloud.Error
	if err != nil && !errors.Is(err, policy.ErrDenied) && errors.As(err, &apiErr) && apiErr.Code == hcloud.ErrorCodeInvalidInput {
		klog.InfoS("route refused as invalid; reading the network again and planning once more", "route", want, "node", nodeName, "err", err)
		err = r.ensure(ctx, want, nodeName)
	}
	if err != nil {
		return fmt.Errorf("%s: route %s: %w", op, want, err)
	}
	return nil
}

// ensure plans want against the cached routes and runs the plan.
func (r *Routes) ensure(ctx context.Context, want routeplan.Route, nodeName string) error {
	routes, _, err := r.network.Get(ctx)
	if err != nil {
		return err
	}
	plan := routeplan.Ensure(routes, want, nodeName)
	if plan.Empty() {
		klog.V(4).InfoS("route exists", "route", want, "node", nodeName)
		return nil
	}
	return r.run(ctx, plan)
}

// DeleteRoute deletes the network route to route.DestinationCIDR (route as returned by
// ListRoutes), planned by routeplan.Remove against the network as last read. A route that is
// no longer there counts as deleted.
//
// A route whose destination is the PodCIDR of another node than route.TargetNode (upstream
// deletes a route that leads to the wrong node or to no server before it creates the right
// one) is left to that node's CreateRoute, which replaces it in one plan: deleting it here
// would be the first half of a replacement whose second half the policy may deny.
//
// # Errors
//
// An invalid destination, or a failed run (wrapped; a policy denial wraps policy.ErrDenied).
func (r *Routes) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	const op = "routes.DeleteRoute"
	compatmetrics.Operation(compatmetrics.OpDeleteRoute)
	if route == nil {
		return fmt.Errorf("%s: nil route", op)
	}
	dest, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return fmt.Errorf("%s: invalid destination %q: expect a CIDR", op, route.DestinationCIDR)
	}
	dest = dest.Masked()
	if claimer := r.claimedBy(dest, string(route.TargetNode)); claimer != "" {
		klog.InfoS("route left to the CreateRoute of the node whose PodCIDR it is: it replaces the route in one plan",
			"destination", dest, "node", claimer, "target", route.TargetNode)
		return nil
	}
	routes, _, err := r.network.Get(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	plan := routeplan.Remove(routes, dest, string(route.TargetNode))
	if plan.Empty() {
		klog.InfoS("route already gone", "destination", dest, "network", r.o.Network.ID)
		return nil
	}
	if err := r.run(ctx, plan); err != nil {
		return fmt.Errorf("%s: %s: %w", op, strings.Join(plan.Labels(), ", "), err)
	}
	return nil
}

// run runs plan and records its effect in the cached routes; after a failed run (other than a
// denial, which changed nothing) the network is read again on the next lookup.
func (r *Routes) run(ctx context.Context, plan routeplan.Plan) error {
	err := r.o.Runner.RunRoutes(ctx, r.o.Network, plan)
	switch {
	case err == nil:
		r.network.Update(plan.Apply)
	case !errors.Is(err, policy.ErrDenied):
		r.network.Invalidate()
	}
	return err
}

// claimedBy returns the name of a node other than target whose PodCIDRs include dest, or "".
func (r *Routes) claimedBy(dest netip.Prefix, target string) string {
	nodes, err := r.o.Nodes.List(labels.Everything())
	if err != nil {
		klog.V(2).InfoS("listing nodes failed; deleting the route on its own", "err", err)
		return ""
	}
	for _, n := range nodes {
		if n.Name == target {
			continue
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Masked() == dest {
				return n.Name
			}
		}
	}
	return ""
}

// hasInternalIP reports whether addresses has an InternalIP (an initialised node in a network).
func hasInternalIP(addresses []corev1.NodeAddress) bool {
	return slices.ContainsFunc(addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP })
}

// checkInternalIP returns an error when gateway is not one of the InternalIPs of addresses (a
// node with none is refused before, see hasInternalIP), as the official CCM.
func checkInternalIP(addresses []corev1.NodeAddress, gateway netip.Addr) error {
	var internal []string
	for _, a := range addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Unmap() == gateway {
			return nil
		}
		internal = append(internal, a.Address)
	}
	return fmt.Errorf("is not an InternalIP of the node (%s)", strings.Join(internal, ", "))
}

// gateway returns the IP of node's server in the network, from the server cache.
func (r *Routes) gateway(ctx context.Context, node *corev1.Node) (netip.Addr, error) {
	var s *hcloud.Server
	if node.Spec.ProviderID != "" {
		id, err := providerid.ToServerID(node.Spec.ProviderID)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("node %q: %w", node.Name, err)
		}
		if s, err = r.o.Servers.ByID(ctx, id); err != nil {
			return netip.Addr{}, err
		}
	} else {
		var err error
		if s, err = r.o.Servers.ByName(ctx, node.Name); err != nil {
			return netip.Addr{}, err
		}
	}
	if s == nil {
		return netip.Addr{}, fmt.Errorf("no server for node %q", node.Name)
	}
	ip, ok := r.privateIP(s)
	if !ok {
		return netip.Addr{}, fmt.Errorf("server %q (%d) is not attached to network %d: attach it, or check HCLOUD_NETWORK", s.Name, s.ID, r.o.Network.ID)
	}
	return ip, nil
}

// privateIP returns s's IP in the network.
func (r *Routes) privateIP(s *hcloud.Server) (netip.Addr, bool) {
	pn := s.PrivateNetFor(r.o.Network)
	if pn == nil {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(pn.IP)
	return ip.Unmap(), ok
}

// ipv4ClusterCIDR returns the IPv4 CIDR of --cluster-cidr ("a" or "a,b"), nil if there is
// none.
func ipv4ClusterCIDR(s string) (*net.IPNet, error) {
	if s == "" {
		return nil, nil
	}
	var v4 *net.IPNet
	for _, part := range strings.Split(s, ",") {
		_, cidr, err := net.ParseCIDR(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("invalid cluster CIDR %q: set --cluster-cidr to a CIDR such as 10.244.0.0/16, or two separated by a comma", s)
		}
		if cidr.IP.To4() != nil && v4 == nil {
			v4 = cidr
		}
	}
	return v4, nil
}

func (r *Routes) warnOutsideClusterCIDR(node *corev1.Node, dest netip.Prefix) {
	cluster := r.clusterCIDR
	if cluster == nil {
		return
	}
	clusterOnes, _ := cluster.Mask.Size()
	if cluster.Contains(dest.Addr().AsSlice()) && dest.Bits() >= clusterOnes {
		return
	}
	msg := fmt.Sprintf("route CIDR %s is not contained within cluster CIDR %s", dest, cluster)
	klog.InfoS("cluster CIDR misconfigured", "node", node.Name, "msg", msg)
	r.o.Recorder.Event(node, corev1.EventTypeWarning, EventClusterCIDRMisconfigured, msg)
}

// read reads the network's routes (the network cache's Load).
func (r *Routes) read(ctx context.Context) ([]routeplan.Route, error) {
	id := r.o.Network.ID
	n, _, err := r.o.Networks.GetByID(ctx, id)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading network %d: %w", id, err)
	case n == nil:
		return nil, fmt.Errorf("network %d not found: check HCLOUD_NETWORK", id)
	}
	return convert(n.Routes), nil
}

// convert returns the network's IPv4 routes for the planner.
func convert(in []hcloud.NetworkRoute) []routeplan.Route {
	out := make([]routeplan.Route, 0, len(in))
	for _, nr := range in {
		if nr.Destination == nil || nr.Gateway == nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(nr.Destination.IP)
		gw, gwOK := netip.AddrFromSlice(nr.Gateway)
		if !ok || !gwOK {
			continue
		}
		ones, _ := nr.Destination.Mask.Size()
		out = append(out, routeplan.Route{Destination: netip.PrefixFrom(ip.Unmap(), ones).Masked(), Gateway: gw.Unmap()})
	}
	return out
}
