package ciplan

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// After returns the state the CCM would leave if r's plans ran on st: each Service's load
// balancer as the steps that run leave it (a created one gets the next free ID and no public
// IP, which only the API assigns). A denied step skips itself and the steps that need it (steps
// fail alone, gate.Gate.Decide), so a denied create changes nothing, nor does a Service with an
// error. The plans apply in the order they were made (a
// group member planned again comes after the others). Other load balancers of st are kept. The
// members of a load balancer group plan one load balancer: a later member's plan of a load
// balancer an earlier one creates updates that one (matched by name), it creates no second.
//
// Only what the planner models is kept: label selector targets of a planned load balancer are
// dropped (lbplan.Actual counts them only).
func (r Report) After(st State) State {
	out := State{LoadBalancers: append([]*hcloud.LoadBalancer{}, st.LoadBalancers...)}
	next := int64(1)
	for _, lb := range st.LoadBalancers {
		next = max(next, lb.ID+1)
	}
	created := map[string]int64{} // by name: the IDs given to the load balancers created here
	for _, s := range slices.SortedFunc(slices.Values(r.Services), func(a, b ServiceResult) int { return a.seq - b.seq }) {
		if !s.ran || s.final == nil {
			continue
		}
		lb := loadBalancerOf(s.final)
		if id, ok := created[lb.Name]; ok && lb.ID == 0 {
			lb.ID = id
		}
		i := -1
		for j, have := range out.LoadBalancers {
			if have.ID == lb.ID && lb.ID != 0 {
				i = j
			}
		}
		if i < 0 {
			if lb.ID == 0 {
				lb.ID = next
				created[lb.Name] = next
				next++
			}
			out.LoadBalancers = append(out.LoadBalancers, lb)
			continue
		}
		out.LoadBalancers[i] = lb
	}
	return out
}

// WriteState writes st to path in the shape ReadState reads (the JSON of GET /v1/load_balancers).
func WriteState(path string, st State) error {
	resp := schema.LoadBalancerListResponse{LoadBalancers: []schema.LoadBalancer{}}
	for _, lb := range st.LoadBalancers {
		resp.LoadBalancers = append(resp.LoadBalancers, hcloud.SchemaFromLoadBalancer(lb))
	}
	data, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// loadBalancerOf is a in the API's terms, the inverse of lbplan.NewActual for what Actual
// holds; an optional setting the planner left unset (nil) becomes the API's zero value.
func loadBalancerOf(a *lbplan.Actual) *hcloud.LoadBalancer {
	lb := &hcloud.LoadBalancer{
		ID: a.ID, Name: a.Name, Labels: a.Labels,
		LoadBalancerType: &hcloud.LoadBalancerType{Name: a.Type, MaxTargets: a.MaxTargets, MaxServices: a.MaxServices},
		Location:         &hcloud.Location{Name: a.Location, NetworkZone: hcloud.NetworkZone(a.NetworkZone)},
		Algorithm:        hcloud.LoadBalancerAlgorithm{Type: a.Algorithm},
		PublicNet: hcloud.LoadBalancerPublicNet{
			Enabled: a.PublicInterface,
			IPv4:    hcloud.LoadBalancerPublicNetIPv4{IP: net.ParseIP(a.IPv4), DNSPtr: a.IPv4RDNS},
			IPv6:    hcloud.LoadBalancerPublicNetIPv6{IP: net.ParseIP(a.IPv6), DNSPtr: a.IPv6RDNS},
		},
		Protection: hcloud.LoadBalancerProtection{Delete: a.Protected},
	}
	for _, n := range a.Networks {
		nw := &hcloud.Network{ID: n.ID}
		if _, r, err := net.ParseCIDR(n.IPRange); err == nil {
			nw.IPRange = r
		}
		lb.PrivateNet = append(lb.PrivateNet, hcloud.LoadBalancerPrivateNet{Network: nw, IP: n.IP})
	}
	for _, s := range a.Services {
		lb.Services = append(lb.Services, serviceOf(s))
	}
	for _, t := range a.Targets {
		lb.Targets = append(lb.Targets, hcloud.LoadBalancerTarget{
			Type: hcloud.LoadBalancerTargetTypeServer, UsePrivateIP: t.UsePrivateIP,
			Server: &hcloud.LoadBalancerTargetServer{Server: &hcloud.Server{ID: t.ServerID}},
		})
	}
	for _, ip := range a.IPTargets {
		lb.Targets = append(lb.Targets, hcloud.LoadBalancerTarget{Type: hcloud.LoadBalancerTargetTypeIP, IP: &hcloud.LoadBalancerTargetIP{IP: ip}})
	}
	return lb
}

func serviceOf(s lbplan.Listener) hcloud.LoadBalancerService {
	h, hc := s.HTTP, s.HealthCheck
	out := hcloud.LoadBalancerService{
		Protocol: s.Protocol, ListenPort: s.ListenPort, DestinationPort: s.DestinationPort,
		Proxyprotocol: deref(s.Proxyprotocol),
		HTTP: hcloud.LoadBalancerServiceHTTP{
			CookieName: deref(h.CookieName), CookieLifetime: deref(h.CookieLifetime), TimeoutIdle: deref(h.TimeoutIdle),
			RedirectHTTP: deref(h.RedirectHTTP), StickySessions: deref(h.StickySessions),
		},
		HealthCheck: hcloud.LoadBalancerServiceHealthCheck{
			Protocol: hc.Protocol, Port: hc.Port,
			Interval: deref(hc.Interval), Timeout: deref(hc.Timeout), Retries: deref(hc.Retries),
		},
	}
	for _, id := range h.Certificates {
		out.HTTP.Certificates = append(out.HTTP.Certificates, &hcloud.Certificate{ID: id})
	}
	if hc.Protocol == hcloud.LoadBalancerServiceProtocolHTTP || hc.Protocol == hcloud.LoadBalancerServiceProtocolHTTPS {
		out.HealthCheck.HTTP = &hcloud.LoadBalancerServiceHealthCheckHTTP{
			Domain: deref(hc.Domain), Path: deref(hc.Path), StatusCodes: hc.StatusCodes, TLS: deref(hc.TLS),
		}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
