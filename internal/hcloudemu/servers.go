package hcloudemu

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// ServerSpec describes a server to seed; servers are not created by API
// clients.
type ServerSpec struct {
	ID         int64             `json:"id,omitempty"`          // 0 = next free
	Name       string            `json:"name"`                  // required, unique
	Type       string            `json:"type,omitempty"`        // default "cx22"
	Location   string            `json:"location,omitempty"`    // default "fsn1"
	Status     string            `json:"status,omitempty"`      // default "running"
	PublicIPv4 string            `json:"public_ipv4,omitempty"` // "" = allocate one; "none" = no IPv4
	PublicIPv6 string            `json:"public_ipv6,omitempty"` // CIDR like "2a01:4f8:1:2::/64"; "" = allocate; "none" = no IPv6
	Labels     map[string]string `json:"labels,omitempty"`
	Networks   []ServerNetwork   `json:"networks,omitempty"`
}

// ServerNetwork attaches a seeded server to a network.
type ServerNetwork struct {
	NetworkID int64  `json:"network_id"`
	IP        string `json:"ip,omitempty"` // "" = next free in a subnet of the server's zone
}

var serverStatuses = []string{"initializing", "starting", "running", "stopping", "off", "deleting", "migrating", "rebuilding", "unknown"}

// AddServer adds a server and returns its ID.
//
// # Errors
//
// Unknown type, location or network, a taken name, ID or IP, an invalid
// status or label, or a network without a subnet in the server's zone.
func (e *Emulator) AddServer(s ServerSpec) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addServerLocked(s)
}

func (e *Emulator) addServerLocked(s ServerSpec) (int64, error) {
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("add server %q: %s", s.Name, fmt.Sprintf(format, args...))
	}
	if s.Name == "" {
		return fail("name is required")
	}
	for _, srv := range e.st.servers {
		if srv.Name == s.Name {
			return fail("name already used by server %d", srv.ID)
		}
	}
	if s.ID != 0 {
		if _, ok := e.st.servers[s.ID]; ok || s.ID < 0 {
			return fail("ID %d is taken or invalid", s.ID)
		}
	}
	typ, ok := e.st.serverType(orDefault(s.Type, "cx22"))
	if !ok {
		return fail("unknown server type %q", s.Type)
	}
	loc, ok := e.st.location(orDefault(s.Location, "fsn1"))
	if !ok {
		return fail("unknown location %q", s.Location)
	}
	status := orDefault(s.Status, "running")
	if !slices.Contains(serverStatuses, status) {
		return fail("invalid status %q", status)
	}
	if err := validateLabels(s.Labels); err != nil {
		return fail("%s", err.message)
	}
	srv := &schema.Server{
		Name: s.Name, Status: status, Created: e.now(), ServerType: typ, Location: loc,
		Labels: copyLabels(s.Labels), PrivateNet: []schema.ServerPrivateNet{}, Volumes: []int64{},
		LoadBalancers: []int64{}, PrimaryDiskSize: typ.Disk,
		PublicNet: schema.ServerPublicNet{FloatingIPs: []int64{}, Firewalls: []schema.ServerFirewall{}},
	}
	switch s.PublicIPv4 {
	case "none":
	case "":
		ip := e.st.allocIPv4()
		srv.PublicNet.IPv4 = schema.ServerPublicNetIPv4{ID: e.st.nextID("primary_ip"), IP: ip, DNSPtr: "static." + ip + ".clients.your-server.de"}
	default:
		a, err := netip.ParseAddr(s.PublicIPv4)
		if err != nil || !a.Is4() || e.st.publicIPs[a.String()] {
			return fail("public IPv4 %q is invalid or taken", s.PublicIPv4)
		}
		e.st.publicIPs[a.String()] = true
		srv.PublicNet.IPv4 = schema.ServerPublicNetIPv4{ID: e.st.nextID("primary_ip"), IP: a.String(), DNSPtr: "static." + a.String() + ".clients.your-server.de"}
	}
	switch s.PublicIPv6 {
	case "none":
	case "":
		srv.PublicNet.IPv6 = schema.ServerPublicNetIPv6{ID: e.st.nextID("primary_ip"), IP: e.st.allocIPv6Net(), DNSPtr: []schema.ServerPublicNetIPv6DNSPtr{}}
	default:
		p, err := netip.ParsePrefix(s.PublicIPv6)
		if err != nil || !p.Addr().Is6() || e.st.publicIPs[p.Masked().String()] {
			return fail("public IPv6 %q is not a free IPv6 CIDR", s.PublicIPv6)
		}
		e.st.publicIPs[p.Masked().String()] = true
		srv.PublicNet.IPv6 = schema.ServerPublicNetIPv6{ID: e.st.nextID("primary_ip"), IP: p.Masked().String(), DNSPtr: []schema.ServerPublicNetIPv6DNSPtr{}}
	}
	for _, sn := range s.Networks {
		nw, ok := e.st.networks[sn.NetworkID]
		if !ok {
			return fail("network %d not found", sn.NetworkID)
		}
		if slices.ContainsFunc(srv.PrivateNet, func(p schema.ServerPrivateNet) bool { return p.Network == nw.ID }) {
			return fail("attached to network %d twice", nw.ID)
		}
		ip, aerr := e.st.allocPrivateIP(nw, loc.NetworkZone, sn.IP)
		if aerr != nil {
			return fail("attach to network %d: %s", nw.ID, aerr.message)
		}
		srv.PrivateNet = append(srv.PrivateNet, schema.ServerPrivateNet{
			Network: nw.ID, IP: ip, AliasIPs: []string{}, MACAddress: macAddress(nw.ID, ip),
		})
	}
	if s.ID != 0 {
		srv.ID = s.ID
		e.st.useID("server", s.ID)
	} else {
		srv.ID = e.st.nextID("server")
	}
	e.st.servers[srv.ID] = srv
	return srv.ID, nil
}

func macAddress(network int64, ip string) string {
	a, _ := netip.ParseAddr(ip)
	b := a.As4()
	return fmt.Sprintf("86:00:%02x:%02x:%02x:%02x", byte(network), b[1], b[2], b[3]) //nolint:gosec // only the network ID's low byte is meant
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// SetServerStatus sets a server's status ("running", "off", ...).
func (e *Emulator) SetServerStatus(id int64, status string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	srv, ok := e.st.servers[id]
	if !ok {
		return fmt.Errorf("set status of server %d: not found", id)
	}
	if !slices.Contains(serverStatuses, status) {
		return fmt.Errorf("set status of server %d: invalid status %q", id, status)
	}
	srv.Status = status
	return nil
}

// SetServerLabels replaces a server's labels.
func (e *Emulator) SetServerLabels(id int64, labels map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	srv, ok := e.st.servers[id]
	if !ok {
		return fmt.Errorf("set labels of server %d: not found", id)
	}
	if err := validateLabels(labels); err != nil {
		return fmt.Errorf("set labels of server %d: %s", id, err.message)
	}
	srv.Labels = copyLabels(labels)
	return nil
}

// DeleteServer removes a server, and with it every load balancer target
// naming it (as the real API does when a server is deleted).
func (e *Emulator) DeleteServer(id int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	srv, ok := e.st.servers[id]
	if !ok {
		return fmt.Errorf("delete server %d: not found", id)
	}
	delete(e.st.servers, id)
	delete(e.st.publicIPs, srv.PublicNet.IPv4.IP)
	delete(e.st.publicIPs, srv.PublicNet.IPv6.IP)
	for _, lb := range e.st.lbs {
		lb.Targets = slices.DeleteFunc(lb.Targets, func(t schema.LoadBalancerTarget) bool {
			return t.Type == "server" && t.Server != nil && t.Server.ID == id
		})
	}
	return nil
}

// Server returns a snapshot of a server as the API renders it.
func (e *Emulator) Server(id int64) (schema.Server, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	srv, ok := e.st.servers[id]
	if !ok {
		return schema.Server{}, false
	}
	return deepCopy(e.renderServer(srv)), true
}

// lbRefsOf returns the IDs of the load balancers targeting srv, directly
// or through a label selector, in ID order.
func (e *Emulator) lbRefsOf(srv *schema.Server) []int64 {
	refs := []int64{}
	for id, lb := range e.st.lbs {
		for _, t := range lb.Targets {
			direct := t.Type == "server" && t.Server != nil && t.Server.ID == srv.ID
			if direct || (t.Type == "label_selector" && t.LabelSelector != nil && selectorMatches(t.LabelSelector.Selector, srv.Labels)) {
				refs = append(refs, id)
				break
			}
		}
	}
	slices.Sort(refs)
	return refs
}

func selectorMatches(selector string, labels map[string]string) bool {
	sel, err := ParseSelector(selector)
	return err == nil && sel.Matches(labels)
}

func (e *Emulator) renderServer(srv *schema.Server) schema.Server {
	out := *srv
	out.LoadBalancers = e.lbRefsOf(srv)
	return out
}

func (e *Emulator) listServers(r *http.Request) (int, any, error) {
	statuses := r.URL.Query()["status"]
	items := make([]listItem, 0, len(e.st.servers))
	for _, id := range sortedIDs(e.st.servers) {
		srv := e.st.servers[id]
		items = append(items, listItem{
			id: id, name: srv.Name, labels: srv.Labels, created: srv.Created,
			status: srv.Status,
			render: func() any { return e.renderServer(srv) },
		})
	}
	return e.list(r, "servers", items, func(it listItem) bool {
		return len(statuses) == 0 || slices.Contains(statuses, it.status)
	})
}

func (e *Emulator) getServer(r *http.Request) (int, any, error) {
	id, err := pathID(r, "server")
	if err != nil {
		return 0, nil, err
	}
	srv, ok := e.st.servers[id]
	if !ok {
		return 0, nil, errNotFound("server", id)
	}
	return http.StatusOK, schema.ServerGetResponse{Server: e.renderServer(srv)}, nil
}
