package hcloudemu

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// state is everything the API serves. It is guarded by Emulator.mu.
//
// Back-references (server.load_balancers, network.servers,
// network.load_balancers, certificate.used_by) are not stored: they are
// computed when rendering, so they can never go stale.
type state struct {
	locations   []schema.Location
	serverTypes []schema.ServerType
	lbTypes     []schema.LoadBalancerType

	servers  map[int64]*schema.Server
	networks map[int64]*schema.Network
	lbs      map[int64]*schema.LoadBalancer
	certs    map[int64]*schema.Certificate
	actions  map[int64]*action

	// locks maps "kind/id" to the last action started on that resource.
	locks map[string]int64
	// deleting maps a load balancer to its running delete action.
	deleting map[int64]int64
	// issuing maps a managed certificate to its running create action.
	issuing map[int64]int64

	// metadataServer is the name or ID of the server the metadata service
	// answers for; "" = none.
	metadataServer string

	seq       map[string]int64
	publicIPs map[string]bool
	v4Next    int
	v6Next    int
}

func newState() *state {
	return &state{
		locations:   defaultLocations(),
		serverTypes: defaultServerTypes(),
		lbTypes:     defaultLoadBalancerTypes(),
		servers:     map[int64]*schema.Server{},
		networks:    map[int64]*schema.Network{},
		lbs:         map[int64]*schema.LoadBalancer{},
		certs:       map[int64]*schema.Certificate{},
		actions:     map[int64]*action{},
		locks:       map[string]int64{},
		deleting:    map[int64]int64{},
		issuing:     map[int64]int64{},
		seq:         map[string]int64{},
		publicIPs:   map[string]bool{},
	}
}

// nextID returns the next free ID of a kind, above every ID used so far.
func (s *state) nextID(kind string) int64 {
	s.seq[kind]++
	return s.seq[kind]
}

// useID records an explicitly chosen ID so nextID never returns it.
func (s *state) useID(kind string, id int64) {
	if id > s.seq[kind] {
		s.seq[kind] = id
	}
}

// location resolves a location by ID or name.
func (s *state) location(idOrName string) (schema.Location, bool) {
	for _, l := range s.locations {
		if l.Name == idOrName || strconv.FormatInt(l.ID, 10) == idOrName {
			return l, true
		}
	}
	return schema.Location{}, false
}

func (s *state) serverType(idOrName string) (schema.ServerType, bool) {
	for _, t := range s.serverTypes {
		if t.Name == idOrName || strconv.FormatInt(t.ID, 10) == idOrName {
			return t, true
		}
	}
	return schema.ServerType{}, false
}

func (s *state) lbType(v schema.IDOrName) (schema.LoadBalancerType, bool) {
	for _, t := range s.lbTypes {
		if (v.ID != 0 && t.ID == v.ID) || (v.Name != "" && t.Name == v.Name) {
			return t, true
		}
	}
	return schema.LoadBalancerType{}, false
}

// Public address pools: documentation ranges first, then the benchmarking
// range 198.18.0.0/15 so large benchmarks never run out.
var v4Pools = []netip.Prefix{
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
}

// allocIPv4 returns an unused public IPv4 address.
func (s *state) allocIPv4() string {
	for {
		n := s.v4Next
		s.v4Next++
		for _, p := range v4Pools {
			size := 1 << (32 - p.Bits())
			if n < size-2 {
				a := p.Addr().As4()
				v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
				//nolint:gosec // 0 <= n < size-2, and a pool's size fits 32 bits
				v += uint32(n + 1)
				//nolint:gosec // the 4 bytes of v
				ip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
				if ip.As4()[3] == 0 || ip.As4()[3] == 255 || s.publicIPs[ip.String()] {
					break
				}
				s.publicIPs[ip.String()] = true
				return ip.String()
			}
			n -= size - 2
		}
		if s.v4Next > 1<<20 {
			panic("hcloudemu: public IPv4 pools exhausted")
		}
	}
}

// allocIPv6Net returns an unused /64 from 2001:db8::/32 (servers).
func (s *state) allocIPv6Net() string {
	for {
		s.v6Next++
		cidr := fmt.Sprintf("2001:db8:%x:%x::/64", s.v6Next>>16, s.v6Next&0xffff)
		if !s.publicIPs[cidr] {
			s.publicIPs[cidr] = true
			return cidr
		}
	}
}

// allocIPv6 returns an unused single IPv6 address (load balancers).
func (s *state) allocIPv6() string {
	for {
		s.v6Next++
		ip := fmt.Sprintf("2001:db8:ffff:%x::1", s.v6Next&0xffff)
		if !s.publicIPs[ip] {
			s.publicIPs[ip] = true
			return ip
		}
	}
}

// usedPrivateIPs returns the private IPs taken in a network: its first
// address (the gateway), servers, load balancers.
func (s *state) usedPrivateIPs(nw *schema.Network) map[string]bool {
	used := map[string]bool{}
	if p, err := netip.ParsePrefix(nw.IPRange); err == nil {
		used[p.Masked().Addr().Next().String()] = true
	}
	used["172.31.1.1"] = true
	for _, srv := range s.servers {
		for _, pn := range srv.PrivateNet {
			if pn.Network == nw.ID {
				used[pn.IP] = true
				for _, a := range pn.AliasIPs {
					used[a] = true
				}
			}
		}
	}
	for _, lb := range s.lbs {
		for _, pn := range lb.PrivateNet {
			if pn.Network == nw.ID {
				used[pn.IP] = true
			}
		}
	}
	return used
}

// allocPrivateIP picks an IP for a resource in zone. With ip set it checks
// that the IP lies in a subnet of that zone and is free; otherwise it takes
// the first free IP (from the subnet's third address on) of the first subnet
// in the zone.
func (s *state) allocPrivateIP(nw *schema.Network, zone, ip string) (string, *apiError) {
	used := s.usedPrivateIPs(nw)
	var zoneSubnets []netip.Prefix
	for _, sn := range nw.Subnets {
		p, err := netip.ParsePrefix(sn.IPRange)
		if err != nil || sn.NetworkZone != zone || sn.Type == "vswitch" {
			continue
		}
		zoneSubnets = append(zoneSubnets, p.Masked())
	}
	if len(zoneSubnets) == 0 {
		return "", newError(422, "no_subnet_available", "network %d has no subnet in network zone %s", nw.ID, zone)
	}
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return "", errInvalid("ip", "%q is not an IPv4 address", ip)
		}
		in := false
		for _, p := range zoneSubnets {
			if p.Contains(a) && a != p.Addr() {
				in = true
			}
		}
		if !in || used[a.String()] {
			return "", newError(422, "ip_not_available", "IP %s is not available in network %d", ip, nw.ID)
		}
		return a.String(), nil
	}
	for _, p := range zoneSubnets {
		a := p.Addr().Next().Next()
		for ; p.Contains(a); a = a.Next() {
			if !used[a.String()] && p.Contains(a.Next()) { // skip the broadcast address
				return a.String(), nil
			}
		}
	}
	return "", newError(422, "ip_not_available", "no free IP left in network %d, zone %s", nw.ID, zone)
}

// sortedIDs returns the keys of m in ascending order.
func sortedIDs[V any](m map[int64]V) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// deepCopy copies a schema value through JSON, so snapshots handed to
// callers share nothing with the state.
func deepCopy[T any](v T) T {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("hcloudemu: copy %T: %v", v, err))
	}
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("hcloudemu: copy %T: %v", v, err))
	}
	return out
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func timePtr(t time.Time) *time.Time { return &t }
