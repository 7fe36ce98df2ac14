package lbplan

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Actual is a load balancer in the planner's terms: one read from the API (NewActual), or the
// state a mutation leaves (Mutation.Apply). It is the one model of a load balancer's state:
// the policy view (Policy) and the Service status (Status) are both built from it.
type Actual struct {
	ID         int64
	Name       string
	Labels     map[string]string
	Type       string
	MaxTargets int
	// MaxServices is the type's max_services; 0 when the API did not embed the type.
	MaxServices     int
	Location        string
	NetworkZone     string
	Algorithm       hcloud.LoadBalancerAlgorithmType
	PublicInterface bool
	IPv4, IPv6      string
	IPv4RDNS        string
	IPv6RDNS        string
	Networks        []AttachedNetwork
	Services        []Listener // sorted by ListenPort
	Targets         []Target   // server targets only, sorted by ServerID
	// IPTargets are the addresses of IP targets, sorted. Without Robot support the official CCM
	// removes every IP target, and so does the planner.
	IPTargets []string
	// OtherTargets counts label selector targets; they are left alone and count against
	// max_targets.
	OtherTargets int
	Protected    bool
	// Created is when Hetzner created the load balancer (zero when the answer had no time).
	Created time.Time
}

// AttachedNetwork is one private network the load balancer is attached to.
type AttachedNetwork struct {
	ID      int64
	IPRange string // empty when the API response did not embed the network's range
	IP      net.IP
}

// NewActual converts lb; nil stays nil (no load balancer).
func NewActual(lb *hcloud.LoadBalancer) *Actual {
	if lb == nil {
		return nil
	}
	a := &Actual{
		ID:              lb.ID,
		Name:            lb.Name,
		Labels:          maps.Clone(lb.Labels),
		Algorithm:       lb.Algorithm.Type,
		PublicInterface: lb.PublicNet.Enabled,
		IPv4RDNS:        lb.PublicNet.IPv4.DNSPtr,
		IPv6RDNS:        lb.PublicNet.IPv6.DNSPtr,
		Protected:       lb.Protection.Delete,
		Created:         lb.Created,
	}
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	if lb.PublicNet.IPv4.IP != nil {
		a.IPv4 = lb.PublicNet.IPv4.IP.String()
	}
	if lb.PublicNet.IPv6.IP != nil {
		a.IPv6 = lb.PublicNet.IPv6.IP.String()
	}
	if t := lb.LoadBalancerType; t != nil {
		a.Type, a.MaxTargets, a.MaxServices = t.Name, t.MaxTargets, t.MaxServices
	}
	if l := lb.Location; l != nil {
		a.Location, a.NetworkZone = l.Name, string(l.NetworkZone)
	}
	for _, pn := range lb.PrivateNet {
		if pn.Network == nil {
			continue
		}
		n := AttachedNetwork{ID: pn.Network.ID, IP: pn.IP}
		if pn.Network.IPRange != nil {
			n.IPRange = pn.Network.IPRange.String()
		}
		a.Networks = append(a.Networks, n)
	}
	for _, s := range lb.Services {
		a.Services = append(a.Services, actualService(s))
	}
	slices.SortFunc(a.Services, func(x, y Listener) int { return cmp.Compare(x.ListenPort, y.ListenPort) })
	for _, t := range lb.Targets {
		if t.Type == hcloud.LoadBalancerTargetTypeServer && t.Server != nil && t.Server.Server != nil {
			a.Targets = append(a.Targets, Target{ServerID: t.Server.Server.ID, UsePrivateIP: t.UsePrivateIP})
			continue
		}
		if t.Type == hcloud.LoadBalancerTargetTypeIP && t.IP != nil {
			a.IPTargets = append(a.IPTargets, t.IP.IP)
			continue
		}
		a.OtherTargets++
	}
	slices.Sort(a.IPTargets)
	slices.SortFunc(a.Targets, func(x, y Target) int { return cmp.Compare(x.ServerID, y.ServerID) })
	return a
}

// actualService converts a listener as the API reports it; every field is set.
func actualService(s hcloud.LoadBalancerService) Listener {
	h, hc := s.HTTP, s.HealthCheck
	out := Listener{
		Protocol:        s.Protocol,
		ListenPort:      s.ListenPort,
		DestinationPort: s.DestinationPort,
		Proxyprotocol:   &s.Proxyprotocol,
		HTTP: HTTP{
			CookieName:     &h.CookieName,
			CookieLifetime: &h.CookieLifetime,
			TimeoutIdle:    &h.TimeoutIdle,
			RedirectHTTP:   &h.RedirectHTTP,
			StickySessions: &h.StickySessions,
			Certificates:   []int64{},
		},
		HealthCheck: HealthCheck{
			Protocol: hc.Protocol,
			Port:     hc.Port,
			Interval: &hc.Interval,
			Timeout:  &hc.Timeout,
			Retries:  &hc.Retries,
		},
	}
	for _, c := range h.Certificates {
		if c != nil {
			out.HTTP.Certificates = append(out.HTTP.Certificates, c.ID)
		}
	}
	slices.Sort(out.HTTP.Certificates)
	if x := hc.HTTP; x != nil {
		out.HealthCheck.Domain, out.HealthCheck.Path, out.HealthCheck.TLS = &x.Domain, &x.Path, &x.TLS
		out.HealthCheck.StatusCodes = slices.Clone(x.StatusCodes)
	}
	return out
}

// with returns a copy of a changed by f; a is not modified. A nil a stays nil (no load
// balancer to change).
func (a *Actual) with(f func(c *Actual)) *Actual {
	if a == nil {
		return nil
	}
	c := *a
	c.Labels = maps.Clone(a.Labels)
	c.Networks = slices.Clone(a.Networks)
	c.Services = slices.Clone(a.Services)
	c.Targets = slices.Clone(a.Targets)
	c.IPTargets = slices.Clone(a.IPTargets)
	f(&c)
	return &c
}

// PrivateIPUnknown reports whether an attachment's private IP is known only to the API (an
// attachment without a fixed IP, modelled by AttachNetwork.Apply): the load balancer must be
// read again to show it.
func (a *Actual) PrivateIPUnknown() bool {
	if a == nil {
		return false
	}
	return slices.ContainsFunc(a.Networks, func(n AttachedNetwork) bool { return n.IP == nil })
}
