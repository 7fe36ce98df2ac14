// Package routes implements cloudprovider.Routes for a Hetzner Cloud private network: each
// node's PodCIDR becomes a network route whose gateway is the node's server IP in the
// network, as in the official hcloud-cloud-controller-manager. Every write goes through a
// RouteWriter (the executor, which asks the policy gate first).
package routes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
)

// EventClusterCIDRMisconfigured is the reason of the Warning event on a Node whose PodCIDR
// lies outside the cluster CIDR (same reason as the official CCM; do not rename).
const EventClusterCIDRMisconfigured = "ClusterCIDRMisconfigured"

// DefaultNetworkMaxAge is how long a read of the network serves ListRoutes and DeleteRoute
// (CreateRoute always reads it again). Upstream calls ListRoutes and then creates or deletes
// routes, so a reconcile reads the network about once, plus once per created route.
const DefaultNetworkMaxAge = 5 * time.Second

// RouteWriter performs route writes; it is the only code that changes the network. Its errors
// are returned upstream wrapped (a policy denial wraps policy.ErrDenied).
type RouteWriter interface {
	AddRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error
	DeleteRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error
}

// Options configure [New].
type Options struct {
	// Client reads the network.
	Client *hcloud.Client
	// Network is HCLOUD_NETWORK, already resolved (its ID is what counts; it is read again).
	Network *hcloud.Network
	// ClusterCIDR is --cluster-cidr: one CIDR or a comma-separated dual-stack pair. PodCIDRs
	// outside its IPv4 CIDR raise a Warning event. Empty is allowed: upstream runs the route
	// controller only with a cluster CIDR, and HCLOUD_NETWORK alone must not stop the CCM.
	ClusterCIDR string
	// Servers maps route gateways to servers and nodes to gateways.
	Servers *servercache.Cache
	// Writer adds and deletes routes.
	Writer RouteWriter
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

	mu        sync.Mutex
	network   *hcloud.Network // replaced, never modified in place
	networkAt time.Time
	now       func() time.Time
}

var _ cloudprovider.Routes = (*Routes)(nil)

// New returns Routes for o.Network.
//
// # Errors
//
// A missing client, network, server cache, writer or node lister, or a cluster CIDR that does
// not parse.
func New(o Options) (*Routes, error) {
	const op = "routes.New"
	var errs []error
	if o.Client == nil || o.Network == nil || o.Servers == nil || o.Writer == nil || o.Nodes == nil {
		errs = append(errs, errors.New("client, network, server cache, route writer and node lister are required"))
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
	// The network given was read at startup; the first lookup reads it again.
	return &Routes{o: o, clusterCIDR: clusterCIDR, network: o.Network, now: time.Now}, nil
}

// ListRoutes lists the routes of the network. Each is named "<gateway>-<destination>" and
// targets the node named like the server that owns the gateway IP in the network; a route
// whose gateway belongs to no server is a blackhole (upstream deletes it if it lies in the
// cluster CIDR). Routes outside the cluster CIDR are listed too; upstream leaves them alone.
//
// The network is read again when the last read is older than NetworkMaxAge; our own writes
// are applied to the cached copy, and a failed write discards it. Cost: at most one
// GET /networks/{id} and one server list (shared with InstancesV2).
func (r *Routes) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	const op = "routes.ListRoutes"
	network, err := r.loadNetwork(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	servers, err := r.o.Servers.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	byIP := make(map[string]*hcloud.Server, len(servers))
	for _, s := range servers {
		if pn := s.PrivateNetFor(network); pn != nil && pn.IP != nil {
			byIP[pn.IP.String()] = s
		}
	}
	out := make([]*cloudprovider.Route, 0, len(network.Routes))
	for _, nr := range network.Routes {
		if nr.Destination == nil || nr.Gateway == nil {
			continue
		}
		route := &cloudprovider.Route{
			Name:            nr.Gateway.String() + "-" + nr.Destination.String(),
			DestinationCIDR: nr.Destination.String(),
		}
		if s, ok := byIP[nr.Gateway.String()]; ok {
			route.TargetNode = types.NodeName(s.Name)
		} else {
			route.Blackhole = true
		}
		out = append(out, route)
	}
	return out, nil
}

// CreateRoute makes the network route route.DestinationCIDR via the IP of route.TargetNode's
// server in the network. nameHint is ignored.
//
// The network is read again first, so the upsert sees the current routes. It is an upsert:
// an identical route is left alone (no write), a route to the same
// destination through another gateway is deleted and added anew. IPv6 destinations are
// rejected before any API call (private networks route IPv4 only). When the route carries
// TargetNodeAddresses, the gateway must be one of its InternalIPs. A destination outside the
// cluster CIDR raises a Warning event ClusterCIDRMisconfigured on the node but is created.
//
// # Errors
//
// An unknown node or server, a server outside the network, a gateway that is not an
// InternalIP of the node, or a failed write (wrapped; a policy denial wraps policy.ErrDenied).
func (r *Routes) CreateRoute(ctx context.Context, _ string, _ string, route *cloudprovider.Route) error {
	const op = "routes.CreateRoute"
	if route == nil {
		return fmt.Errorf("%s: nil route", op)
	}
	ip, dest, err := net.ParseCIDR(route.DestinationCIDR)
	if err != nil {
		return fmt.Errorf("%s: invalid destination %q: expect an IPv4 CIDR", op, route.DestinationCIDR)
	}
	if ip.To4() == nil {
		return fmt.Errorf("%s: destination %s is IPv6: Hetzner Cloud private networks route IPv4 only", op, route.DestinationCIDR)
	}
	nodeName := string(route.TargetNode)
	node, err := r.o.Nodes.Get(nodeName)
	if err != nil {
		return fmt.Errorf("%s: node %q: %w", op, nodeName, err)
	}
	network, err := r.loadNetwork(ctx, true)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	gateway, err := r.gateway(ctx, node, network)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(route.TargetNodeAddresses) > 0 && !slices.ContainsFunc(route.TargetNodeAddresses, func(a corev1.NodeAddress) bool {
		return a.Type == corev1.NodeInternalIP && a.Address == gateway.String()
	}) {
		return fmt.Errorf("%s: gateway %s (the server's IP in network %d) is not an InternalIP of node %q: check the node's addresses and HCLOUD_NETWORK", op, gateway, network.ID, nodeName)
	}
	r.warnOutsideClusterCIDR(node, dest)

	want := hcloud.NetworkRoute{Destination: dest, Gateway: gateway}
	for _, nr := range network.Routes {
		if nr.Destination == nil || nr.Destination.String() != dest.String() {
			continue
		}
		if nr.Gateway.Equal(gateway) {
			klog.V(4).InfoS("route exists", "destination", dest, "gateway", gateway, "node", nodeName)
			return nil
		}
		if err := r.o.Writer.DeleteRoute(ctx, network, nr, nodeName); err != nil {
			r.forgetNetwork()
			return fmt.Errorf("%s: replacing route %s via %s: %w", op, dest, nr.Gateway, err)
		}
		r.applyLocal(nil, &nr)
	}
	if err := r.o.Writer.AddRoute(ctx, network, want, nodeName); err != nil {
		r.forgetNetwork()
		return fmt.Errorf("%s: route %s via %s: %w", op, dest, gateway, err)
	}
	r.applyLocal(&want, nil)
	return nil
}

// DeleteRoute deletes the network route to route.DestinationCIDR, whose gateway is taken from
// the network as last read (at most NetworkMaxAge old; route as returned by ListRoutes). A
// route that is no longer in the network counts as deleted.
//
// # Errors
//
// An invalid destination, or a failed write (wrapped; a policy denial wraps policy.ErrDenied).
func (r *Routes) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	const op = "routes.DeleteRoute"
	if route == nil {
		return fmt.Errorf("%s: nil route", op)
	}
	_, dest, err := net.ParseCIDR(route.DestinationCIDR)
	if err != nil {
		return fmt.Errorf("%s: invalid destination %q: expect a CIDR", op, route.DestinationCIDR)
	}
	network, err := r.loadNetwork(ctx, false)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	i := slices.IndexFunc(network.Routes, func(nr hcloud.NetworkRoute) bool {
		return nr.Destination != nil && nr.Destination.String() == dest.String()
	})
	if i < 0 {
		klog.InfoS("route already gone", "destination", dest, "network", network.ID)
		return nil
	}
	nr := network.Routes[i]
	if err := r.o.Writer.DeleteRoute(ctx, network, nr, string(route.TargetNode)); err != nil {
		r.forgetNetwork()
		return fmt.Errorf("%s: route %s via %s: %w", op, dest, nr.Gateway, err)
	}
	r.applyLocal(nil, &nr)
	return nil
}

// gateway returns the IP of node's server in network.
func (r *Routes) gateway(ctx context.Context, node *corev1.Node, network *hcloud.Network) (net.IP, error) {
	var s *hcloud.Server
	if node.Spec.ProviderID != "" {
		id, err := providerid.ToServerID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", node.Name, err)
		}
		if s, err = r.o.Servers.ByID(ctx, id); err != nil {
			return nil, err
		}
	} else {
		var err error
		if s, err = r.o.Servers.ByName(ctx, node.Name); err != nil {
			return nil, err
		}
	}
	if s == nil {
		return nil, fmt.Errorf("no server for node %q", node.Name)
	}
	pn := s.PrivateNetFor(network)
	if pn == nil || pn.IP == nil {
		return nil, fmt.Errorf("server %q (%d) is not attached to network %d: attach it, or check HCLOUD_NETWORK", s.Name, s.ID, network.ID)
	}
	return pn.IP, nil
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

func (r *Routes) warnOutsideClusterCIDR(node *corev1.Node, dest *net.IPNet) {
	cluster := r.clusterCIDR
	if cluster == nil {
		return
	}
	clusterOnes, _ := cluster.Mask.Size()
	destOnes, _ := dest.Mask.Size()
	if cluster.Contains(dest.IP) && destOnes >= clusterOnes {
		return
	}
	msg := fmt.Sprintf("route CIDR %s is not contained within cluster CIDR %s", dest, cluster)
	klog.InfoS("cluster CIDR misconfigured", "node", node.Name, "msg", msg)
	r.o.Recorder.Event(node, corev1.EventTypeWarning, EventClusterCIDRMisconfigured, msg)
}

// loadNetwork returns the network, read again if force or if the last read is older than
// NetworkMaxAge.
func (r *Routes) loadNetwork(ctx context.Context, force bool) (*hcloud.Network, error) {
	r.mu.Lock()
	if !force && r.now().Sub(r.networkAt) <= r.o.NetworkMaxAge {
		n := r.network
		r.mu.Unlock()
		return n, nil
	}
	id := r.network.ID
	r.mu.Unlock()

	started := r.now()
	n, _, err := r.o.Client.Network.GetByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading network %d: %w", id, err)
	}
	if n == nil {
		return nil, fmt.Errorf("network %d not found: check HCLOUD_NETWORK", id)
	}
	r.mu.Lock()
	r.network, r.networkAt = n, started
	r.mu.Unlock()
	return n, nil
}

// forgetNetwork makes the next lookup read the network again (after a failed write, the
// cached routes may be wrong).
func (r *Routes) forgetNetwork() {
	r.mu.Lock()
	r.networkAt = time.Time{}
	r.mu.Unlock()
}

// applyLocal records our own write in the cached network (a copy), so the next lookups see it
// without reading the network again.
func (r *Routes) applyLocal(added, deleted *hcloud.NetworkRoute) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := *r.network
	n.Routes = slices.DeleteFunc(slices.Clone(n.Routes), func(nr hcloud.NetworkRoute) bool {
		return deleted != nil && nr.Destination != nil && nr.Destination.String() == deleted.Destination.String() && nr.Gateway.Equal(deleted.Gateway)
	})
	if added != nil {
		n.Routes = append(n.Routes, *added)
	}
	r.network = &n
}
