package lbservice

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"

	"slices"

	corev1 "k8s.io/api/core/v1"
	"time"
)

// desiredServices builds one listener per TCP Service port; other protocols are reported in
// UnsupportedPorts (event UnsupportedProtocolConfigured), as the official CCM does.
func desiredServices(d *lbplan.Desired, in DesiredInput) error {
	tmpl, err := serviceTemplate(in)
	if err != nil {
		return err
	}
	hcPort, err := annotation.LBSvcHealthCheckPort.Port(in.Service)
	if err != nil && isSet(err) {
		return err
	}
	for _, p := range in.Service.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			d.UnsupportedPorts = append(d.UnsupportedPorts, p)
			continue
		}
		if p.NodePort == 0 {
			return fmt.Errorf("service port %d has no node port: set spec.allocateLoadBalancerNodePorts to true", p.Port)
		}
		s := tmpl
		s.ListenPort, s.DestinationPort = int(p.Port), int(p.NodePort)
		s.HealthCheck.Port = int(p.NodePort)
		if hcPort != 0 {
			s.HealthCheck.Port = hcPort
		}
		s.HTTP.Certificates = slices.Clone(tmpl.HTTP.Certificates)
		s.HealthCheck.StatusCodes = slices.Clone(tmpl.HealthCheck.StatusCodes)
		d.Services = append(d.Services, s)
	}
	slices.SortFunc(d.Services, func(a, b lbplan.Listener) int { return cmp.Compare(a.ListenPort, b.ListenPort) })
	for i := 1; i < len(d.Services); i++ {
		if d.Services[i].ListenPort == d.Services[i-1].ListenPort {
			return fmt.Errorf("service port %d is used twice", d.Services[i].ListenPort)
		}
	}
	return nil
}

// serviceTemplate reads the annotations shared by every listener.
func serviceTemplate(in DesiredInput) (lbplan.Listener, error) {
	svc, def := in.Service, in.Defaults
	var s lbplan.Listener
	var err error
	p, err := annotation.LBSvcProtocol.Protocol(svc)
	if s.Protocol, err = pick(p, err, hcloud.LoadBalancerServiceProtocolTCP); err != nil {
		return s, err
	}
	if s.Proxyprotocol, err = optionalBool(annotation.LBSvcProxyProtocol, svc, def.UsesProxyProtocol); err != nil {
		return s, err
	}
	if s.HTTP, err = httpSettings(in, s.Protocol); err != nil {
		return s, err
	}
	s.HealthCheck, err = healthCheck(in, s.Protocol)
	return s, err
}

// desiredManagedCertificate reads the managed certificate annotations of an https Service
// with certificate-type managed.
func desiredManagedCertificate(d *lbplan.Desired, in DesiredInput) error {
	svc := in.Service
	if len(d.Services) == 0 || d.Services[0].Protocol != hcloud.LoadBalancerServiceProtocolHTTPS {
		return nil
	}
	if ct, _ := annotation.LBSvcHTTPCertificateType.CertificateType(svc); ct != hcloud.CertificateTypeManaged {
		return nil
	}
	domains, err := annotation.LBSvcHTTPManagedCertificateDomains.CSV(svc)
	if errors.Is(err, annotation.ErrNotSet) {
		return annotation.Usagef(string(annotation.LBSvcHTTPManagedCertificateDomains), "%q is managed: set %q to the certificate's domains", annotation.LBSvcHTTPCertificateType, annotation.LBSvcHTTPManagedCertificateDomains)
	}
	if err != nil {
		return err
	}
	// As with the official CCM: an empty name is the default name, and a staging value that is
	// not a bool is false.
	name, _ := annotation.LBSvcHTTPManagedCertificateName.Value(svc)
	if name == "" {
		name = "ccm-managed-certificate-" + string(svc.UID)
	}
	staging, _ := annotation.LBSvcHTTPManagedCertificateUseACMEStaging.Bool(svc)
	mc := &lbplan.ManagedCertificate{ID: in.ManagedCertificateID, Name: name, Domains: domains, Labels: map[string]string{lbplan.LabelServiceUID: string(svc.UID)}}
	if staging {
		mc.Labels[lbplan.LabelACMEStaging] = "true"
	}
	d.ManagedCertificate = mc
	return nil
}

// optional reads an optional annotation with accessor get; nil when not set.
func optional[T any](get func(*corev1.Service) (T, error), svc *corev1.Service) (*T, error) {
	v, err := get(svc)
	switch {
	case err == nil:
		return &v, nil
	case isSet(err):
		return nil, err
	}
	return nil, nil
}

// httpSettings reads the http annotations; each one is optional. They are managed for http and
// https listeners only.
func httpSettings(in DesiredInput, proto hcloud.LoadBalancerServiceProtocol) (lbplan.HTTP, error) {
	svc := in.Service
	var h lbplan.HTTP
	var err error
	if h.CookieName, err = optional(annotation.LBSvcHTTPCookieName.NonEmptyString, svc); err != nil {
		return h, err
	}
	if h.CookieLifetime, err = optional(annotation.LBSvcHTTPCookieLifetime.Duration, svc); err != nil {
		return h, err
	}
	if h.TimeoutIdle, err = optional(annotation.LBSvcHTTPTimeoutIdle.Duration, svc); err != nil {
		return h, err
	}
	if h.RedirectHTTP, err = optional(annotation.LBSvcRedirectHTTP.Bool, svc); err != nil {
		return h, err
	}
	if h.StickySessions, err = optional(annotation.LBSvcHTTPStickySessions.Bool, svc); err != nil {
		return h, err
	}
	// Any value but exactly managed is uploaded (the official CCM's comparison). https without
	// certificates is sent as it is: the API decides, as with the official CCM.
	ct, _ := annotation.LBSvcHTTPCertificateType.CertificateType(svc)
	switch {
	case ct == hcloud.CertificateTypeManaged:
		h.Certificates = []int64{in.ManagedCertificateID}
	case len(in.CertificateIDs) > 0:
		h.Certificates = slices.Compact(slices.Sorted(slices.Values(in.CertificateIDs)))
	}
	if proto == hcloud.LoadBalancerServiceProtocolTCP {
		return lbplan.HTTP{}, nil
	}
	return h, nil
}

// healthCheck reads the health check annotations as the official CCM does: without any of
// protocol, port, interval, timeout and retries (annotation or environment) the check is tcp
// on the node port; with one, the protocol defaults to the listener's and the http fields count
// for an http or https check.
func healthCheck(in DesiredInput, proto hcloud.LoadBalancerServiceProtocol) (lbplan.HealthCheck, error) {
	svc, def := in.Service, in.Defaults
	hc := lbplan.HealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolTCP}
	hp, err := optional(annotation.LBSvcHealthCheckProtocol.Protocol, svc)
	if err != nil {
		return hc, err
	}
	if _, err := annotation.LBSvcHealthCheckPort.Port(svc); err != nil && isSet(err) {
		return hc, err
	}
	_, portSet := annotation.LBSvcHealthCheckPort.Value(svc)
	if hc.Interval, err = optionalDuration(annotation.LBSvcHealthCheckInterval, svc, def.HealthCheckInterval); err != nil {
		return hc, err
	}
	if hc.Timeout, err = optionalDuration(annotation.LBSvcHealthCheckTimeout, svc, def.HealthCheckTimeout); err != nil {
		return hc, err
	}
	if hc.Retries, err = optional(annotation.LBSvcHealthCheckRetries.Int, svc); err != nil {
		return hc, err
	}
	if hc.Retries == nil && def.HealthCheckRetries != 0 {
		hc.Retries = &def.HealthCheckRetries
	}
	if hc.Retries != nil && *hc.Retries < 0 {
		return hc, annotation.Usagef(string(annotation.LBSvcHealthCheckRetries), "invalid value for %q: %d (expect a non-negative integer)", annotation.LBSvcHealthCheckRetries, *hc.Retries)
	}
	if hp == nil && !portSet && hc.Interval == nil && hc.Timeout == nil && hc.Retries == nil {
		return hc, nil // the official CCM's plain tcp check
	}
	hc.Protocol = proto
	if hp != nil {
		hc.Protocol = *hp
	}
	if !lbplan.IsHTTP(hc.Protocol) {
		return hc, nil
	}
	if hc.Domain, err = optional(annotation.LBSvcHealthCheckHTTPDomain.String, svc); err != nil {
		return hc, err
	}
	if hc.Path, err = optional(annotation.LBSvcHealthCheckHTTPPath.String, svc); err != nil {
		return hc, err
	}
	codes, err := annotation.LBSvcHealthCheckHTTPStatusCodes.CSV(svc)
	if hc.StatusCodes, err = pick(codes, err, nil); err != nil {
		return hc, err
	}
	hc.TLS, err = optional(annotation.LBSvcHealthCheckHTTPValidateCertificate.Bool, svc)
	return hc, err
}

// optionalDuration is the annotation, else the environment default (0: not set).
func optionalDuration(n annotation.Name, svc *corev1.Service, def time.Duration) (*time.Duration, error) {
	v, err := optional(n.Duration, svc)
	if v == nil && err == nil && def != 0 {
		v = &def
	}
	return v, err
}
