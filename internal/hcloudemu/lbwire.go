package hcloudemu

import "github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

// The wire form of a load balancer. hcloud-go's schema types encode a
// sub-object that does not apply as null ("http" of a tcp service, "ip" of a
// server target); Hetzner's API description has no field there, so these
// types shadow those fields with omitempty ones. hcloud-go decodes both forms
// alike. A label selector target always carries "targets" (required by the
// description), [] when no server matches.

// lbWire is a load balancer as the API answers it.
type lbWire struct {
	schema.LoadBalancer
	Services []serviceWire `json:"services"`
	Targets  []targetWire  `json:"targets"`
}

type serviceWire struct {
	schema.LoadBalancerService
	HTTP        *schema.LoadBalancerServiceHTTP `json:"http,omitempty"`
	HealthCheck *healthCheckWire                `json:"health_check,omitempty"`
}

type healthCheckWire struct {
	schema.LoadBalancerServiceHealthCheck
	HTTP *schema.LoadBalancerServiceHealthCheckHTTP `json:"http,omitempty"`
}

type targetWire struct {
	schema.LoadBalancerTarget
	Server        *schema.LoadBalancerTargetServer        `json:"server,omitempty"`
	LabelSelector *schema.LoadBalancerTargetLabelSelector `json:"label_selector,omitempty"`
	IP            *schema.LoadBalancerTargetIP            `json:"ip,omitempty"`
	Targets       *[]targetWire                           `json:"targets,omitempty"`
}

// wireLB returns the wire form of lb, a load balancer rendered by renderLB.
func wireLB(lb schema.LoadBalancer) lbWire {
	out := lbWire{LoadBalancer: lb, Services: make([]serviceWire, 0, len(lb.Services)), Targets: wireTargets(lb.Targets)}
	for _, s := range lb.Services {
		w := serviceWire{LoadBalancerService: s, HTTP: s.HTTP}
		if s.HealthCheck != nil {
			w.HealthCheck = &healthCheckWire{LoadBalancerServiceHealthCheck: *s.HealthCheck, HTTP: s.HealthCheck.HTTP}
		}
		out.Services = append(out.Services, w)
	}
	return out
}

func wireTargets(ts []schema.LoadBalancerTarget) []targetWire {
	out := make([]targetWire, 0, len(ts))
	for _, t := range ts {
		w := targetWire{LoadBalancerTarget: t, Server: t.Server, LabelSelector: t.LabelSelector, IP: t.IP}
		if t.Type == "label_selector" {
			sub := wireTargets(t.Targets)
			w.Targets = &sub
		}
		out = append(out, w)
	}
	return out
}

// lbReply is the body of GET and PUT /load_balancers/{id}.
type lbReply struct {
	LoadBalancer lbWire `json:"load_balancer"`
}

// lbCreateReply is the body of POST /load_balancers.
type lbCreateReply struct {
	LoadBalancer lbWire        `json:"load_balancer"`
	Action       schema.Action `json:"action"`
}
