package lbplan

import (
	"fmt"
	"net"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
)

// OpChangeDNSPtr is ChangeDNSPtr's operation, as in input.Input.Operation. It MUST not
// change: policies match on it.
const OpChangeDNSPtr = "change_dns_ptr"

func init() { register(ChangeDNSPtr{}) }

// ChangeDNSPtr sets the reverse DNS record of the public IPv4 (or IPv6) address; the executor
// takes the address from the load balancer, so it also works right after Create.
type ChangeDNSPtr struct {
	update
	IPv6 bool
	Ptr  string
}

func (ChangeDNSPtr) Operation() string { return OpChangeDNSPtr }
func (m ChangeDNSPtr) Label() string {
	if m.IPv6 {
		return "change_dns_ptr(ipv6)"
	}
	return "change_dns_ptr(ipv4)"
}

// FieldAnnotation names the annotation of the record for the fields dns_ptr and ip of a
// refusal of its request (the executor's refusal hints); "" for the others.
func (m ChangeDNSPtr) FieldAnnotation(key string) annotation.Name {
	switch {
	case key != "dns_ptr" && key != "ip":
		return ""
	case m.IPv6:
		return annotation.LBPublicIPv6RDNS
	}
	return annotation.LBPublicIPv4RDNS
}

// Apply sets the record (the policy view has no PTR records).
func (m ChangeDNSPtr) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		if m.IPv6 {
			c.IPv6RDNS = m.Ptr
		} else {
			c.IPv4RDNS = m.Ptr
		}
	})
}

// Request sets the record of the load balancer's public address, as hcloud-go's ChangeDNSPtr
// sends it. The address is a's: right after a create, the create's answer (which carries it).
func (m ChangeDNSPtr) Request(a *Actual, _ int64) (apireq.Request, error) {
	if a == nil {
		return apireq.Request{}, ErrNoLoadBalancer
	}
	addr := a.IPv4
	if m.IPv6 {
		addr = a.IPv6
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return apireq.Request{}, fmt.Errorf("the load balancer has no public address for the record (got %q)", addr)
	}
	return action(a, OpChangeDNSPtr, schema.LoadBalancerActionChangeDNSPtrRequest{IP: ip.String(), DNSPtr: new(m.Ptr)})
}
