package executor

import (
	"context"
	"fmt"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// run is the state of one Run.
type run struct {
	lb *hcloud.LoadBalancer
	// certificateID is the managed certificate created in this run, for listeners that use
	// lbplan.PendingCertificateID.
	certificateID int64
}

// apply runs one mutation and waits for its action. It updates r.lb to the load balancer to use
// for the next mutation (the created one after Create, nil after Delete).
func (x *Executor) apply(ctx context.Context, svc *corev1.Service, r *run, m lbplan.Mutation) error {
	switch m := m.(type) {
	case lbplan.Create:
		lb, err := x.create(ctx, m)
		if err == nil {
			r.lb = lb
		}
		return err
	case lbplan.CreateManagedCertificate:
		id, err := x.createCertificate(ctx, m.Certificate)
		r.certificateID = id
		return err
	}
	if r.lb == nil {
		return errNoLoadBalancer
	}
	next, err := x.applyToLB(ctx, svc, r, m)
	if err == nil {
		r.lb = next
	}
	return err
}

func (x *Executor) applyToLB(ctx context.Context, svc *corev1.Service, r *run, m lbplan.Mutation) (*hcloud.LoadBalancer, error) {
	lb := r.lb
	if d, ok := m.(lbplan.Delete); ok {
		return nil, x.delete(ctx, svc, lb, d)
	}
	action, err := x.call(ctx, lb, withCertificate(m, r.certificateID))
	if err != nil {
		if t, ok := m.(lbplan.AddTarget); ok && hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
			x.recorder.Eventf(nodeRef(t.Target.Node), corev1.EventTypeWarning, ReasonMaxTargetsReached,
				"load balancer %s has reached its target limit: server %d not added", lb.Name, t.Target.ServerID)
			x.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonMaxTargetsReached,
				"load balancer %s has reached its target limit: server %d (node %s) not added", lb.Name, t.Target.ServerID, t.Target.Node)
			return lb, nil
		}
		return nil, err
	}
	if err := x.client.Action.WaitFor(ctx, action); err != nil {
		return nil, err
	}
	if u, ok := m.(lbplan.Update); ok {
		next := *lb
		next.Name, next.Labels = u.Name, u.Labels
		return &next, nil
	}
	return lb, nil
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

func (x *Executor) create(ctx context.Context, c lbplan.Create) (*hcloud.LoadBalancer, error) {
	public := c.PublicInterface
	opts := hcloud.LoadBalancerCreateOpts{
		Name:             c.Name,
		LoadBalancerType: &hcloud.LoadBalancerType{Name: c.Type},
		Algorithm:        &hcloud.LoadBalancerAlgorithm{Type: c.Algorithm},
		Labels:           c.Labels,
		PublicInterface:  &public,
	}
	if c.Location != "" {
		opts.Location = &hcloud.Location{Name: c.Location}
	} else {
		opts.NetworkZone = hcloud.NetworkZone(c.NetworkZone)
	}
	if c.Network != nil {
		opts.Network = &hcloud.Network{ID: c.Network.ID}
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

func addServiceOpts(s lbplan.Service) hcloud.LoadBalancerAddServiceOpts {
	u := updateServiceOpts(s)
	listen := s.ListenPort
	o := hcloud.LoadBalancerAddServiceOpts{
		Protocol: s.Protocol, ListenPort: &listen, DestinationPort: u.DestinationPort, Proxyprotocol: u.Proxyprotocol,
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

// updateServiceOpts sends every managed field; optional fields only when set.
func updateServiceOpts(s lbplan.Service) hcloud.LoadBalancerUpdateServiceOpts {
	dest, proxy := s.DestinationPort, s.Proxyprotocol
	o := hcloud.LoadBalancerUpdateServiceOpts{Protocol: s.Protocol, DestinationPort: &dest, Proxyprotocol: &proxy}
	if s.Protocol != hcloud.LoadBalancerServiceProtocolTCP {
		h := s.HTTP
		o.HTTP = &hcloud.LoadBalancerUpdateServiceOptsHTTP{StickySessions: &h.StickySessions}
		if h.CookieName != "" {
			o.HTTP.CookieName = &h.CookieName
		}
		if h.CookieLifetime != 0 {
			o.HTTP.CookieLifetime = &h.CookieLifetime
		}
		if h.TimeoutIdle != 0 {
			o.HTTP.TimeoutIdle = &h.TimeoutIdle
		}
		if s.Protocol == hcloud.LoadBalancerServiceProtocolHTTPS {
			o.HTTP.RedirectHTTP = &h.RedirectHTTP
			for _, id := range h.Certificates {
				o.HTTP.Certificates = append(o.HTTP.Certificates, &hcloud.Certificate{ID: id})
			}
		}
	}
	hc := s.HealthCheck
	o.HealthCheck = &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Protocol: hc.Protocol, Port: &hc.Port}
	if hc.Interval != 0 {
		o.HealthCheck.Interval = &hc.Interval
	}
	if hc.Timeout != 0 {
		o.HealthCheck.Timeout = &hc.Timeout
	}
	if hc.Retries != 0 {
		o.HealthCheck.Retries = &hc.Retries
	}
	if hc.Protocol != hcloud.LoadBalancerServiceProtocolTCP {
		o.HealthCheck.HTTP = &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{StatusCodes: hc.StatusCodes}
		if hc.Domain != "" {
			o.HealthCheck.HTTP.Domain = &hc.Domain
		}
		if hc.Path != "" {
			o.HealthCheck.HTTP.Path = &hc.Path
		}
		if hc.Protocol == hcloud.LoadBalancerServiceProtocolHTTPS {
			o.HealthCheck.HTTP.TLS = &hc.TLS
		}
	}
	return o
}
