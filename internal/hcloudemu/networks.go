package hcloudemu

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// NetworkSpec describes a network to seed.
type NetworkSpec struct {
	ID      int64             `json:"id,omitempty"` // 0 = next free
	Name    string            `json:"name"`
	IPRange string            `json:"ip_range"` // e.g. "10.0.0.0/8"
	Subnets []SubnetSpec      `json:"subnets,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// SubnetSpec is a subnet of a seeded network.
type SubnetSpec struct {
	Type        string `json:"type,omitempty"` // default "cloud"
	IPRange     string `json:"ip_range"`
	NetworkZone string `json:"network_zone"`
}

var networkZones = []string{"eu-central", "us-east", "us-west", "ap-southeast"}

// AddNetwork adds a private network and returns its ID.
//
// # Errors
//
// A missing or taken name or ID, an IP range that is not a private IPv4
// CIDR, or a subnet outside the range, overlapping another, or in an unknown
// network zone.
func (e *Emulator) AddNetwork(n NetworkSpec) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addNetworkLocked(n)
}

func (e *Emulator) addNetworkLocked(n NetworkSpec) (int64, error) {
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("add network %q: %s", n.Name, fmt.Sprintf(format, args...))
	}
	if n.Name == "" {
		return fail("name is required")
	}
	for _, nw := range e.st.networks {
		if nw.Name == n.Name {
			return fail("name already used by network %d", nw.ID)
		}
	}
	if _, ok := e.st.networks[n.ID]; ok || n.ID < 0 {
		return fail("ID %d is taken or invalid", n.ID)
	}
	rng, err := netip.ParsePrefix(n.IPRange)
	if err != nil || !rng.Addr().Is4() || !isPrivate(rng) {
		return fail("ip_range %q is not a private IPv4 CIDR", n.IPRange)
	}
	if err := validateLabels(n.Labels); err != nil {
		return fail("%s", err.message)
	}
	nw := &schema.Network{
		Name: n.Name, Created: e.now(), IPRange: rng.Masked().String(), Subnets: []schema.NetworkSubnet{},
		Routes: []schema.NetworkRoute{}, Labels: copyLabels(n.Labels),
	}
	gateway := rng.Masked().Addr().Next().String()
	var seen []netip.Prefix
	for _, sn := range n.Subnets {
		p, err := netip.ParsePrefix(sn.IPRange)
		if err != nil || !rng.Contains(p.Addr()) || p.Bits() < rng.Bits() {
			return fail("subnet %q is not inside %s", sn.IPRange, n.IPRange)
		}
		if slices.ContainsFunc(seen, p.Overlaps) {
			return fail("subnet %q overlaps another subnet", sn.IPRange)
		}
		seen = append(seen, p)
		if !slices.Contains(networkZones, sn.NetworkZone) {
			return fail("unknown network zone %q", sn.NetworkZone)
		}
		typ := orDefault(sn.Type, "cloud")
		if typ != "cloud" && typ != "server" && typ != "vswitch" {
			return fail("unknown subnet type %q", typ)
		}
		nw.Subnets = append(nw.Subnets, schema.NetworkSubnet{Type: typ, IPRange: p.Masked().String(), NetworkZone: sn.NetworkZone, Gateway: gateway})
	}
	if n.ID != 0 {
		nw.ID = n.ID
		e.st.useID("network", n.ID)
	} else {
		nw.ID = e.st.nextID("network")
	}
	e.st.networks[nw.ID] = nw
	return nw.ID, nil
}

var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

func isPrivate(p netip.Prefix) bool {
	for _, r := range privateRanges {
		if r.Contains(p.Addr()) && p.Bits() >= r.Bits() {
			return true
		}
	}
	return false
}

// Network returns a snapshot of a network as the API renders it.
func (e *Emulator) Network(id int64) (schema.Network, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	nw, ok := e.st.networks[id]
	if !ok {
		return schema.Network{}, false
	}
	return deepCopy(e.renderNetwork(nw)), true
}

func (e *Emulator) renderNetwork(nw *schema.Network) schema.Network {
	out := *nw
	out.Servers = []int64{}
	out.LoadBalancers = []int64{}
	for _, id := range sortedIDs(e.st.servers) {
		if slices.ContainsFunc(e.st.servers[id].PrivateNet, func(p schema.ServerPrivateNet) bool { return p.Network == nw.ID }) {
			out.Servers = append(out.Servers, id)
		}
	}
	for _, id := range sortedIDs(e.st.lbs) {
		if slices.ContainsFunc(e.st.lbs[id].PrivateNet, func(p schema.LoadBalancerPrivateNet) bool { return p.Network == nw.ID }) {
			out.LoadBalancers = append(out.LoadBalancers, id)
		}
	}
	return out
}

func (e *Emulator) listNetworks(r *http.Request) (int, any, error) {
	items := make([]listItem, 0, len(e.st.networks))
	for _, id := range sortedIDs(e.st.networks) {
		nw := e.st.networks[id]
		items = append(items, listItem{id: id, name: nw.Name, labels: nw.Labels, created: nw.Created,
			render: func() any { return e.renderNetwork(nw) }})
	}
	return e.list(r, "networks", items, nil)
}

func (e *Emulator) networkByPath(r *http.Request) (*schema.Network, error) {
	id, err := pathID(r, "network")
	if err != nil {
		return nil, err
	}
	nw, ok := e.st.networks[id]
	if !ok {
		return nil, errNotFound("network", id)
	}
	return nw, nil
}

func (e *Emulator) getNetwork(r *http.Request) (int, any, error) {
	nw, err := e.networkByPath(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, schema.NetworkGetResponse{Network: e.renderNetwork(nw)}, nil
}

func (e *Emulator) updateNetwork(r *http.Request) (int, any, error) {
	nw, err := e.networkByPath(r)
	if err != nil {
		return 0, nil, err
	}
	var req schema.NetworkUpdateRequest
	if err := decode(r, &req, false); err != nil {
		return 0, nil, err
	}
	if req.Name != "" {
		if err := validateName(req.Name); err != nil {
			return 0, nil, err
		}
		for _, other := range e.st.networks {
			if other.Name == req.Name && other.ID != nw.ID {
				return 0, nil, newError(http.StatusConflict, "uniqueness_error", "network name %q is already used", req.Name)
			}
		}
	}
	if req.Labels != nil {
		if err := validateLabels(*req.Labels); err != nil {
			return 0, nil, err
		}
	}
	if req.Name != "" {
		nw.Name = req.Name
	}
	if req.Labels != nil {
		nw.Labels = copyLabels(*req.Labels)
	}
	if req.ExposeRoutesToVSwitch != nil {
		nw.ExposeRoutesToVSwitch = *req.ExposeRoutesToVSwitch
	}
	return http.StatusOK, schema.NetworkUpdateResponse{Network: e.renderNetwork(nw)}, nil
}

// deleteNetwork answers 204; attached servers and load balancers are
// detached.
func (e *Emulator) deleteNetwork(r *http.Request) (int, any, error) {
	nw, err := e.networkByPath(r)
	if err != nil {
		return 0, nil, err
	}
	if nw.Protection.Delete {
		return 0, nil, newError(http.StatusLocked, "protected", "network %d is delete protected", nw.ID)
	}
	if e.locked("network", nw.ID) {
		return 0, nil, errLocked()
	}
	for _, srv := range e.st.servers {
		srv.PrivateNet = slices.DeleteFunc(srv.PrivateNet, func(p schema.ServerPrivateNet) bool { return p.Network == nw.ID })
	}
	for _, lb := range e.st.lbs {
		lb.PrivateNet = slices.DeleteFunc(lb.PrivateNet, func(p schema.LoadBalancerPrivateNet) bool { return p.Network == nw.ID })
	}
	delete(e.st.networks, nw.ID)
	return http.StatusNoContent, nil, nil
}

// networkVerbs are the network actions networkAction serves.
var networkVerbs = []string{"add_route", "delete_route", "change_protection"}

func (e *Emulator) networkAction(r *http.Request) (int, any, error) {
	nw, err := e.networkByPath(r)
	if err != nil {
		return 0, nil, err
	}
	switch verb := verbOf(r); verb {
	case "add_route", "delete_route":
		var req schema.NetworkActionAddRouteRequest
		if err := decode(r, &req, false); err != nil {
			return 0, nil, err
		}
		if e.locked("network", nw.ID) {
			return 0, nil, errConflict()
		}
		if verb == "add_route" {
			return e.addRoute(r, nw, req)
		}
		return e.deleteRoute(r, nw, req)
	case "change_protection":
		var req schema.NetworkActionChangeProtectionRequest
		if err := decode(r, &req, false); err != nil {
			return 0, nil, err
		}
		if e.locked("network", nw.ID) {
			return 0, nil, errLocked()
		}
		a := e.startAction(r, verb, ref("network", nw.ID))
		if !a.fail && req.Delete != nil {
			nw.Protection.Delete = *req.Delete
		}
		return actionReply(a)
	default:
		return 0, nil, newError(http.StatusNotFound, "not_found", "unknown network action %q", verb)
	}
}

var defaultRoute = netip.MustParsePrefix("0.0.0.0/0")

// validateRoute applies the spec's rules: the destination is RFC 1918 or
// 0.0.0.0/0 and overlaps no subnet, no other route and not 172.31.1.1; the
// gateway lies in the network and is neither its first IP nor 172.31.1.1.
func validateRoute(nw *schema.Network, req schema.NetworkActionAddRouteRequest) (netip.Prefix, netip.Addr, *apiError) {
	dst, err := netip.ParsePrefix(req.Destination)
	if err != nil || !dst.Addr().Is4() {
		return dst, netip.Addr{}, errInvalid("destination", "%q is not an IPv4 CIDR", req.Destination)
	}
	dst = dst.Masked()
	gw, err := netip.ParseAddr(req.Gateway)
	if err != nil || !gw.Is4() {
		return dst, gw, errInvalid("gateway", "%q is not an IPv4 address", req.Gateway)
	}
	rng := netip.MustParsePrefix(nw.IPRange)
	if gw == rng.Addr().Next() || gw.String() == "172.31.1.1" || !rng.Contains(gw) {
		return dst, gw, errInvalid("gateway", "gateway %s must be inside %s and not a reserved IP", gw, nw.IPRange)
	}
	return dst, gw, nil
}

func (e *Emulator) addRoute(r *http.Request, nw *schema.Network, req schema.NetworkActionAddRouteRequest) (int, any, error) {
	dst, gw, aerr := validateRoute(nw, req)
	if aerr != nil {
		return 0, nil, aerr
	}
	if dst != defaultRoute && !isPrivate(dst) {
		return 0, nil, errInvalid("destination", "destination %s must be a private (RFC 1918) range or 0.0.0.0/0", dst)
	}
	if dst.Contains(netip.MustParseAddr("172.31.1.1")) && dst != defaultRoute {
		return 0, nil, errInvalid("destination", "destination %s must not contain 172.31.1.1", dst)
	}
	for _, sn := range nw.Subnets {
		if p, err := netip.ParsePrefix(sn.IPRange); err == nil && dst != defaultRoute && p.Overlaps(dst) {
			return 0, nil, errInvalid("destination", "destination %s overlaps subnet %s", dst, sn.IPRange)
		}
	}
	for _, rt := range nw.Routes {
		p, err := netip.ParsePrefix(rt.Destination)
		if err == nil && (p == dst || (dst != defaultRoute && p != defaultRoute && p.Overlaps(dst))) {
			return 0, nil, errInvalid("destination", "destination %s overlaps route %s", dst, rt.Destination)
		}
	}
	a := e.startAction(r, "add_route", ref("network", nw.ID))
	if !a.fail {
		nw.Routes = append(nw.Routes, schema.NetworkRoute{Destination: dst.String(), Gateway: gw.String()})
	}
	return actionReply(a)
}

func (e *Emulator) deleteRoute(r *http.Request, nw *schema.Network, req schema.NetworkActionAddRouteRequest) (int, any, error) {
	dst, gw, aerr := validateRoute(nw, req)
	if aerr != nil {
		return 0, nil, aerr
	}
	i := slices.IndexFunc(nw.Routes, func(rt schema.NetworkRoute) bool {
		return rt.Destination == dst.String() && rt.Gateway == gw.String()
	})
	if i < 0 {
		return 0, nil, newError(http.StatusNotFound, "not_found", "route %s via %s not found in network %d", dst, gw, nw.ID)
	}
	a := e.startAction(r, "delete_route", ref("network", nw.ID))
	if !a.fail {
		nw.Routes = slices.Delete(nw.Routes, i, i+1)
	}
	return actionReply(a)
}
