package executor

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// run is the state of one Run.
type run struct {
	// lb is the load balancer the next request changes: plan.Actual's, the created one after
	// the create, nil after a delete.
	lb *hcloud.LoadBalancer
	// stale is set when a request changed what the Service status shows in a way lb does not
	// know (a private IP the API picked); Run then re-reads the load balancer.
	stale bool
	// certificateID is the managed certificate created in this run, for listeners that use
	// lbplan.PendingCertificateID.
	certificateID int64
	// applied are the mutations that ran, in order.
	applied []lbplan.Mutation
}

// apply runs one request and waits for its action. It updates r for the next request.
func (x *Executor) apply(ctx context.Context, svc *corev1.Service, r *run, req lbplan.Request) error {
	switch m := req.Mutation.(type) {
	case lbplan.Create:
		lb, err := x.create(ctx, m, req.Inline, r.certificateID)
		if err == nil {
			r.lb = lb
		}
		return err
	case lbplan.CreateManagedCertificate:
		id, err := x.createCertificate(ctx, m.Certificate)
		r.certificateID = id
		return err
	}
	if len(req.Inline) > 0 {
		return fmt.Errorf("%s cannot carry other mutations", req.Mutation.Label())
	}
	if r.lb == nil {
		return errNoLoadBalancer
	}
	return x.applyToLB(ctx, svc, r, req.Mutation)
}

// applyToLB runs an update or delete mutation and waits for its action.
func (x *Executor) applyToLB(ctx context.Context, svc *corev1.Service, r *run, m lbplan.Mutation) error {
	lb := r.lb
	if d, ok := m.(lbplan.Delete); ok {
		err := x.delete(ctx, svc, lb, d)
		if err == nil {
			r.lb = nil
		}
		return err
	}
	action, err := x.call(ctx, lb, withCertificate(m, r.certificateID))
	if t, ok := m.(lbplan.AddTarget); ok && hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		x.recorder.Eventf(nodeRef(t.Target.Node), corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: server %d not added", lb.Name, t.Target.ServerID)
		x.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: server %d (node %s) not added", lb.Name, t.Target.ServerID, t.Target.Node)
		return nil
	}
	if t, ok := m.(lbplan.AddIPTarget); ok && hcloud.IsError(err, hcloud.ErrorCodeTargetAlreadyDefined) {
		// A concurrent reconcile of the same Service (upstream's node sync runs beside the
		// service sync) added it first: the state the plan wants is there.
		klog.InfoS("IP target already defined", "loadBalancer", lb.Name, "ip", t.Target.IP)
		return nil
	}
	if t, ok := m.(lbplan.AddIPTarget); ok && hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		x.recorder.Eventf(nodeRef(t.Target.Node), corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: IP %s not added", lb.Name, t.Target.IP)
		x.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: IP %s (node %s) not added", lb.Name, t.Target.IP, t.Target.Node)
		return nil
	}
	if err == nil {
		err = x.client.Action.WaitFor(ctx, action)
	}
	if err != nil {
		return err
	}
	next, known := after(lb, m)
	r.lb, r.stale = next, r.stale || !known
	return nil
}

// after returns lb after m as far as the Service status and later requests see it (name,
// labels, public interface, private networks). known is false when only the API knows: the
// private IP it picks for an attachment without a fixed one.
func after(lb *hcloud.LoadBalancer, m lbplan.Mutation) (next *hcloud.LoadBalancer, known bool) {
	c := *lb
	switch m := m.(type) {
	case lbplan.Update:
		c.Name, c.Labels = m.Name, m.Labels
	case lbplan.EnablePublicInterface:
		c.PublicNet.Enabled = true
	case lbplan.DisablePublicInterface:
		c.PublicNet.Enabled = false
	case lbplan.DetachNetwork:
		c.PrivateNet = slices.DeleteFunc(slices.Clone(lb.PrivateNet), func(pn hcloud.LoadBalancerPrivateNet) bool {
			return pn.Network != nil && pn.Network.ID == m.NetworkID
		})
	case lbplan.AttachNetwork:
		if m.Network.IP == nil {
			return &c, false
		}
		c.PrivateNet = append(slices.Clone(lb.PrivateNet), hcloud.LoadBalancerPrivateNet{Network: &hcloud.Network{ID: m.Network.ID}, IP: m.Network.IP})
	}
	return &c, true
}

// call issues the API request of an update mutation.
func (x *Executor) call(ctx context.Context, lb *hcloud.LoadBalancer, m lbplan.Mutation) (*hcloud.Action, error) {
	c := &x.client.LoadBalancer
	var action *hcloud.Action
	var err error
	switch m := m.(type) {
	case lbplan.Update:
		_, _, err = c.Update(ctx, lb, hcloud.LoadBalancerUpdateOpts{Name: m.Name, Labels: m.Labels})
	case lbplan.ChangeType:
		action, _, err = c.ChangeType(ctx, lb, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: m.Type}})
	case lbplan.ChangeAlgorithm:
		action, _, err = c.ChangeAlgorithm(ctx, lb, hcloud.LoadBalancerChangeAlgorithmOpts{Type: m.Algorithm})
	case lbplan.ChangeDNSPtr:
		ip := lb.PublicNet.IPv4.IP
		if m.IPv6 {
			ip = lb.PublicNet.IPv6.IP
		}
		if ip == nil {
			return nil, fmt.Errorf("the load balancer has no public address for the record")
		}
		ptr := m.Ptr
		action, _, err = c.ChangeDNSPtr(ctx, lb, ip.String(), &ptr)
	case lbplan.AttachNetwork:
		action, _, err = c.AttachToNetwork(ctx, lb, hcloud.LoadBalancerAttachToNetworkOpts{
			Network: &hcloud.Network{ID: m.Network.ID}, IP: m.Network.IP, IPRange: m.Network.Subnet,
		})
	case lbplan.DetachNetwork:
		action, _, err = c.DetachFromNetwork(ctx, lb, hcloud.LoadBalancerDetachFromNetworkOpts{Network: &hcloud.Network{ID: m.NetworkID}})
	case lbplan.EnablePublicInterface:
		action, _, err = c.EnablePublicInterface(ctx, lb)
	case lbplan.DisablePublicInterface:
		action, _, err = c.DisablePublicInterface(ctx, lb)
	case lbplan.AddService:
		action, _, err = c.AddService(ctx, lb, addServiceOpts(m.Service))
	case lbplan.UpdateService:
		action, _, err = c.UpdateService(ctx, lb, m.Service.ListenPort, updateServiceOpts(m.Service))
	case lbplan.DeleteService:
		action, _, err = c.DeleteService(ctx, lb, m.ListenPort)
	case lbplan.AddTarget:
		private := m.Target.UsePrivateIP
		action, _, err = c.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{
			Server: &hcloud.Server{ID: m.Target.ServerID}, UsePrivateIP: &private,
		})
	case lbplan.RemoveTarget:
		action, _, err = c.RemoveServerTarget(ctx, lb, &hcloud.Server{ID: m.Target.ServerID})
	case lbplan.RemoveIPTarget:
		action, _, err = c.RemoveIPTarget(ctx, lb, net.ParseIP(m.IP))
	case lbplan.AddIPTarget:
		action, _, err = c.AddIPTarget(ctx, lb, hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP(m.Target.IP)})
	default:
		return nil, fmt.Errorf("unknown mutation %T", m)
	}
	return action, err
}

// withCertificate puts the certificate created in this run into listeners that wait for it.
func withCertificate(m lbplan.Mutation, id int64) lbplan.Mutation {
	fix := func(s lbplan.Service) lbplan.Service {
		certs := slices.Clone(s.HTTP.Certificates)
		for i, c := range certs {
			if c == lbplan.PendingCertificateID {
				certs[i] = id
			}
		}
		s.HTTP.Certificates = certs
		return s
	}
	switch m := m.(type) {
	case lbplan.AddService:
		m.Service = fix(m.Service)
		return m
	case lbplan.UpdateService:
		m.Service = fix(m.Service)
		return m
	}
	return m
}

// createCertificate creates a managed certificate. It does not wait for issuance, which can
// take minutes (DNS validation); listeners can use a pending certificate, as with the official
// CCM. A certificate of that name without our label is a uniqueness_error.
func (x *Executor) createCertificate(ctx context.Context, c lbplan.ManagedCertificate) (int64, error) {
	res, _, err := x.client.Certificate.CreateCertificate(ctx, hcloud.CertificateCreateOpts{
		Name: c.Name, Type: hcloud.CertificateTypeManaged, DomainNames: c.Domains, Labels: c.Labels,
	})
	if hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		return 0, fmt.Errorf("a certificate named %q exists without the %s label: rename it, or set %q to another name: %w",
			c.Name, lbplan.LabelServiceUID, "load-balancer.hetzner.cloud/http-managed-certificate-name", err)
	}
	if err != nil {
		return 0, err
	}
	if res.Certificate == nil {
		return 0, fmt.Errorf("create answered without a certificate")
	}
	return res.Certificate.ID, nil
}

// create sends POST /load_balancers with the listeners and targets of inline in its body, waits
// for the create action and returns the load balancer of the answer, which already holds its
// addresses, listeners and targets. certificateID replaces lbplan.PendingCertificateID in
// listeners.
func (x *Executor) create(ctx context.Context, c lbplan.Create, inline []lbplan.Mutation, certificateID int64) (*hcloud.LoadBalancer, error) {
	opts, err := createOpts(c, inline, certificateID)
	if err != nil {
		return nil, err
	}
	res, _, err := x.client.LoadBalancer.Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := x.client.Action.WaitFor(ctx, res.Action); err != nil {
		return nil, err
	}
	if res.LoadBalancer == nil {
		return nil, fmt.Errorf("create answered without a load balancer")
	}
	return res.LoadBalancer, nil
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
		switch m := withCertificate(m, certificateID).(type) {
		case lbplan.AddService:
			opts.Services = append(opts.Services, createServiceOpts(m.Service))
		case lbplan.AddTarget:
			opts.Targets = append(opts.Targets, hcloud.LoadBalancerCreateOptsTarget{
				Type:         hcloud.LoadBalancerTargetTypeServer,
				Server:       hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: m.Target.ServerID}},
				UsePrivateIP: new(m.Target.UsePrivateIP),
			})
		default:
			return opts, fmt.Errorf("%s cannot ride along with %s", m.Label(), c.Label())
		}
	}
	return opts, nil
}

// createServiceOpts is the listener s as the create request takes it: the same fields as
// add_service.
func createServiceOpts(s lbplan.Service) hcloud.LoadBalancerCreateOptsService {
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

// delete deletes lb and waits for the delete action; not_found means done.
func (x *Executor) delete(ctx context.Context, svc *corev1.Service, lb *hcloud.LoadBalancer, _ lbplan.Delete) error {
	res, _, err := x.client.LoadBalancer.DeleteWithResult(ctx, lb)
	switch {
	case hcloud.IsError(err, hcloud.ErrorCodeNotFound):
		klog.InfoS("load balancer already gone", "loadBalancer", lb.Name, "id", lb.ID)
		return nil
	case hcloud.IsError(err, hcloud.ErrorCodeProtected):
		x.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonDeleteProtected,
			"load balancer %s (%d) has delete protection: not deleted; remove the protection to let the CCM delete it", lb.Name, lb.ID)
		return fmt.Errorf("load balancer %s (%d) has delete protection: %w", lb.Name, lb.ID, err)
	case err != nil:
		return err
	}
	return x.client.Action.WaitFor(ctx, res.Action)
}

// addServiceOpts is the add_service body of s: the fields updateServiceOpts sends, plus the
// listen port.
func addServiceOpts(s lbplan.Service) hcloud.LoadBalancerAddServiceOpts {
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
func updateServiceOpts(s lbplan.Service) hcloud.LoadBalancerUpdateServiceOpts {
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
