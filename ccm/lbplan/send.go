package lbplan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
)

// Event reasons of declared outcomes (apireq.Outcome.Events). They MUST not change: operators
// alert on them.
const (
	// ReasonMaxTargetsReached: a target beyond the load balancer type's limit was not added
	// (Warning on the Node and the Service).
	ReasonMaxTargetsReached = "MaxTargetsReached"
	// ReasonDeleteProtected: the load balancer has delete protection and was not deleted
	// (Warning on the Service).
	ReasonDeleteProtected = "DeleteProtected"
)

// ErrNoLoadBalancer is returned by the Request of a mutation that changes a load balancer
// when there is none yet.
var ErrNoLoadBalancer = errors.New("no load balancer to change: the plan must start with create")

// The paths of the load balancer requests (apireq.Endpoints).
const (
	pathLoadBalancers = apireq.PathLoadBalancers
	pathLoadBalancer  = apireq.PathLoadBalancer
	pathActions       = apireq.PathLoadBalancerActions
)

// API returns the API request that runs r on the load balancer lb (nil before the create),
// with certificateID (the managed certificate created earlier in the run, 0 for none) in the
// listeners that use PendingCertificateID. A create carries r.Inline in its body; no other
// kind carries anything.
func (r Batch) API(lb *Actual, certificateID int64) (apireq.Request, error) {
	if c, ok := r.Mutation.(Create); ok {
		return c.request(r.Inline, certificateID)
	}
	if len(r.Inline) > 0 {
		return apireq.Request{}, fmt.Errorf("%s cannot carry other mutations", r.Mutation.Label())
	}
	return r.Mutation.Request(lb, certificateID)
}

// rider is a kind of mutation that can ride along in the body of a create (POST
// /load_balancers takes services and targets). Plan.Requests and Create's body both use it,
// so "can it ride along" has this one source.
type rider interface {
	Mutation
	// ridesWith reports whether it can ride along with c.
	ridesWith(c Create) bool
	// addTo adds it to the create's options; certificateID replaces PendingCertificateID.
	addTo(o *hcloud.LoadBalancerCreateOpts, certificateID int64)
}

// ridesAlong reports whether m can be sent inline with the create c.
func ridesAlong(c Create, m Mutation) bool {
	r, ok := m.(rider)
	return ok && r.ridesWith(c)
}

// action is the POST of body to the load balancer action name on lb, awaited.
func action(lb *Actual, name string, body any) (apireq.Request, error) {
	if lb == nil {
		return apireq.Request{}, ErrNoLoadBalancer
	}
	return apireq.Post(pathActions+name, lb.ID, body), nil
}

// targetLimitReached is the outcome of an added target beyond the type's limit: skipped, with
// Warning events MaxTargetsReached on the node and the Service (what names the target).
func targetLimitReached(lb *Actual, what, node string) apireq.Outcome {
	return apireq.Outcome{Code: hcloud.ErrorCodeResourceLimitExceeded, Then: apireq.Skipped, Events: []apireq.Event{
		{Node: node, Reason: ReasonMaxTargetsReached, Message: fmt.Sprintf("load balancer %s has reached its target limit: %s not added", lb.Name, what)},
		{Reason: ReasonMaxTargetsReached, Message: fmt.Sprintf("load balancer %s has reached its target limit: %s (node %s) not added", lb.Name, what, node)},
	}}
}

// withCertificate puts the certificate created in this run into a listener that waits for it
// (PendingCertificateID).
func withCertificate(s Listener, id int64) Listener {
	certs := slices.Clone(s.HTTP.Certificates)
	for i, c := range certs {
		if c == PendingCertificateID {
			certs[i] = id
		}
	}
	s.HTTP.Certificates = certs
	return s
}

// addServiceBody is the add_service body of s, as hcloud-go's AddService sends it.
func addServiceBody(s Listener) schema.LoadBalancerActionAddServiceRequest {
	return hcloud.SchemaFromLoadBalancerAddServiceOpts(addServiceOpts(s))
}

// updateServiceBody is the update_service body of s, as hcloud-go's UpdateService sends it.
func updateServiceBody(s Listener) schema.LoadBalancerActionUpdateServiceRequest {
	b := hcloud.SchemaFromLoadBalancerUpdateServiceOpts(updateServiceOpts(s))
	b.ListenPort = s.ListenPort
	return b
}

// createServiceOpts is the listener s as the create request takes it: the same fields as
// add_service.
func createServiceOpts(s Listener) hcloud.LoadBalancerCreateOptsService {
	a := addServiceOpts(s)
	o := hcloud.LoadBalancerCreateOptsService{
		Protocol: a.Protocol, ListenPort: a.ListenPort, DestinationPort: a.DestinationPort, Proxyprotocol: a.Proxyprotocol,
	}
	if a.HTTP != nil {
		h := hcloud.LoadBalancerCreateOptsServiceHTTP(*a.HTTP)
		o.HTTP = &h
	}
	hc := a.HealthCheck
	o.HealthCheck = &hcloud.LoadBalancerCreateOptsServiceHealthCheck{
		Protocol: hc.Protocol, Port: hc.Port, Interval: hc.Interval, Timeout: hc.Timeout, Retries: hc.Retries,
	}
	if hc.HTTP != nil {
		h := hcloud.LoadBalancerCreateOptsServiceHealthCheckHTTP(*hc.HTTP)
		o.HealthCheck.HTTP = &h
	}
	return o
}

// addServiceOpts is the add_service options of s: the fields updateServiceOpts sends, plus
// the listen port.
func addServiceOpts(s Listener) hcloud.LoadBalancerAddServiceOpts {
	u := updateServiceOpts(s)
	o := hcloud.LoadBalancerAddServiceOpts{
		Protocol: s.Protocol, ListenPort: new(s.ListenPort), DestinationPort: u.DestinationPort, Proxyprotocol: u.Proxyprotocol,
	}
	if h := u.HTTP; h != nil {
		o.HTTP = &hcloud.LoadBalancerAddServiceOptsHTTP{
			CookieName: h.CookieName, CookieLifetime: h.CookieLifetime, Certificates: h.Certificates,
			RedirectHTTP: h.RedirectHTTP, StickySessions: h.StickySessions, TimeoutIdle: h.TimeoutIdle,
		}
	}
	hc := u.HealthCheck
	o.HealthCheck = &hcloud.LoadBalancerAddServiceOptsHealthCheck{
		Protocol: hc.Protocol, Port: hc.Port, Interval: hc.Interval, Timeout: hc.Timeout, Retries: hc.Retries,
	}
	if h := hc.HTTP; h != nil {
		o.HealthCheck.HTTP = &hcloud.LoadBalancerAddServiceOptsHealthCheckHTTP{
			Domain: h.Domain, Path: h.Path, StatusCodes: h.StatusCodes, TLS: h.TLS,
		}
	}
	return o
}

// updateServiceOpts sends what the official CCM sends: protocol, destination port and the
// health check's protocol and port always; every optional field only when it is set (the API
// keeps the others); an http object when any http setting is set, and an http health check
// object (maybe empty) for an http or https check.
func updateServiceOpts(s Listener) hcloud.LoadBalancerUpdateServiceOpts {
	o := hcloud.LoadBalancerUpdateServiceOpts{Protocol: s.Protocol, DestinationPort: new(s.DestinationPort), Proxyprotocol: s.Proxyprotocol}
	if h := s.HTTP; h.IsSet() {
		o.HTTP = &hcloud.LoadBalancerUpdateServiceOptsHTTP{
			CookieName: h.CookieName, CookieLifetime: h.CookieLifetime, TimeoutIdle: h.TimeoutIdle,
			RedirectHTTP: h.RedirectHTTP, StickySessions: h.StickySessions,
		}
		for _, id := range h.Certificates {
			o.HTTP.Certificates = append(o.HTTP.Certificates, &hcloud.Certificate{ID: id})
		}
	}
	hc := s.HealthCheck
	o.HealthCheck = &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{
		Protocol: hc.Protocol, Port: new(hc.Port), Interval: hc.Interval, Timeout: hc.Timeout, Retries: hc.Retries,
	}
	if hc.Protocol == hcloud.LoadBalancerServiceProtocolHTTP || hc.Protocol == hcloud.LoadBalancerServiceProtocolHTTPS {
		o.HealthCheck.HTTP = &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{
			Domain: hc.Domain, Path: hc.Path, StatusCodes: hc.StatusCodes, TLS: hc.TLS,
		}
	}
	return o
}
