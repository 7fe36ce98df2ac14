package executor

import (
	"context"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// run is the state of one Run.
type run struct {
	svc *corev1.Service
	// state is the load balancer after the requests sent so far: plan.Actual, then each
	// mutation's Apply (the create's answer after the create); nil after a delete.
	state *lbplan.Actual
	// certificateID is the managed certificate created in this run, for listeners that use
	// lbplan.PendingCertificateID.
	certificateID int64
	// applied are the mutations that ran, in order.
	applied []lbplan.Mutation
}

// apply sends one request with its kind's table entry (kinds.go), awaits its action as the
// entry says, and moves r.state on.
func (x *Executor) apply(ctx context.Context, r *run, req lbplan.Request) error {
	m := req.Mutation
	k, err := kindOf(m)
	if err != nil {
		return err
	}
	if len(req.Inline) > 0 && !k.carries {
		return fmt.Errorf("%s cannot carry other mutations", m.Label())
	}
	if r.state == nil && !k.standalone {
		return errNoLoadBalancer
	}
	a, err := k.send(ctx, x, call{svc: r.svc, lb: r.state, inline: req.Inline, certificateID: r.certificateID}, m)
	if err == nil && k.await == awaitAction {
		err = x.client.Action.WaitFor(ctx, a.action)
	}
	if err != nil {
		return err
	}
	switch {
	case a.skipped:
	case a.created != nil:
		r.state = lbplan.NewActual(a.created)
	default:
		r.state = m.Apply(r.state)
	}
	if a.certificateID != 0 {
		r.certificateID = a.certificateID
	}
	return nil
}

// createOpts is the body of POST /load_balancers for c and the mutations riding along with it
// (add_service, add_target; see lbplan.Plan.Requests).
func createOpts(c lbplan.Create, inline []lbplan.Mutation, certificateID int64) (hcloud.LoadBalancerCreateOpts, error) {
	opts := hcloud.LoadBalancerCreateOpts{
		Name:             c.Name,
		LoadBalancerType: &hcloud.LoadBalancerType{Name: c.Type},
		Labels:           c.Labels,
	}
	if c.Algorithm != nil { // unset: the API default, as the official CCM sends it
		opts.Algorithm = &hcloud.LoadBalancerAlgorithm{Type: *c.Algorithm}
	}
	if !c.PublicInterface {
		opts.PublicInterface = new(false)
	}
	if c.Location != "" {
		opts.Location = &hcloud.Location{Name: c.Location}
	} else {
		opts.NetworkZone = hcloud.NetworkZone(c.NetworkZone)
	}
	if c.Network != nil {
		opts.Network = &hcloud.Network{ID: c.Network.ID}
	}
	for _, m := range inline {
		k, err := kindOf(m)
		if err != nil {
			return opts, err
		}
		if k.inline == nil {
			return opts, fmt.Errorf("%s cannot ride along with %s", m.Label(), c.Label())
		}
		k.inline(&opts, m, certificateID)
	}
	return opts, nil
}

// createServiceOpts is the listener s as the create request takes it: the same fields as
// add_service.
func createServiceOpts(s lbplan.Listener) hcloud.LoadBalancerCreateOptsService {
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

// addServiceOpts is the add_service body of s: the fields updateServiceOpts sends, plus the
// listen port.
func addServiceOpts(s lbplan.Listener) hcloud.LoadBalancerAddServiceOpts {
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
func updateServiceOpts(s lbplan.Listener) hcloud.LoadBalancerUpdateServiceOpts {
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
