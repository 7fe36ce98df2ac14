package lbplan

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

// LabelACMEStaging asks Hetzner to issue a managed certificate from Let's Encrypt staging
// (official CCM, internal testing annotation).
const LabelACMEStaging = "HC-Use-Staging-CA"

// PendingCertificateID stands for the managed certificate that a CreateManagedCertificate
// earlier in the same plan creates; the executor replaces it with the new certificate's ID.
const PendingCertificateID int64 = 0

// ManagedCertificate is the managed (Let's Encrypt) certificate of https listeners.
type ManagedCertificate struct {
	// ID is the existing certificate's ID; PendingCertificateID when it must be created.
	ID      int64
	Name    string
	Domains []string
	Labels  map[string]string
}

// desiredServices builds one listener per TCP Service port; other protocols are reported in
// UnsupportedPorts (event UnsupportedProtocolConfigured), as the official CCM does.
func desiredServices(d *Desired, in Input) error {
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
	slices.SortFunc(d.Services, func(a, b Service) int { return cmpInt(a.ListenPort, b.ListenPort) })
	for i := 1; i < len(d.Services); i++ {
		if d.Services[i].ListenPort == d.Services[i-1].ListenPort {
			return fmt.Errorf("service port %d is used twice", d.Services[i].ListenPort)
		}
	}
	return nil
}

// serviceTemplate reads the annotations shared by every listener.
func serviceTemplate(in Input) (Service, error) {
	svc, def := in.Service, in.Defaults
	var s Service
	var err error
	p, err := annotation.LBSvcProtocol.Protocol(svc)
	if s.Protocol, err = pick(p, err, hcloud.LoadBalancerServiceProtocolTCP); err != nil {
		return s, err
	}
	if s.Proxyprotocol, err = boolOr(annotation.LBSvcProxyProtocol, svc, derefOr(def.UsesProxyProtocol)); err != nil {
		return s, err
	}
	if s.HTTP, err = httpSettings(in, s.Protocol); err != nil {
		return s, err
	}
	s.HealthCheck, err = healthCheck(in)
	return s, err
}

// desiredManagedCertificate reads the managed certificate annotations of an https Service
// with certificate-type managed.
func desiredManagedCertificate(d *Desired, in Input) error {
	svc := in.Service
	if len(d.Services) == 0 || d.Services[0].Protocol != hcloud.LoadBalancerServiceProtocolHTTPS {
		return nil
	}
	ct, err := annotation.LBSvcHTTPCertificateType.CertificateType(svc)
	if err != nil || ct != hcloud.CertificateTypeManaged {
		return nil // errors were reported by desiredServices
	}
	domains, err := annotation.LBSvcHTTPManagedCertificateDomains.CSV(svc)
	if errors.Is(err, annotation.ErrNotSet) {
		return fmt.Errorf("%q is managed: set %q to the certificate's domains", annotation.LBSvcHTTPCertificateType, annotation.LBSvcHTTPManagedCertificateDomains)
	}
	if err != nil {
		return err
	}
	name, err := annotation.LBSvcHTTPManagedCertificateName.NonEmptyString(svc)
	if name, err = pick(name, err, "ccm-managed-certificate-"+string(svc.UID)); err != nil {
		return err
	}
	staging, err := boolOr(annotation.LBSvcHTTPManagedCertificateUseACMEStaging, svc, false)
	if err != nil {
		return err
	}
	mc := &ManagedCertificate{ID: in.ManagedCertificateID, Name: name, Domains: domains, Labels: map[string]string{LabelServiceUID: string(svc.UID)}}
	if staging {
		mc.Labels[LabelACMEStaging] = "true"
	}
	d.ManagedCertificate = mc
	return nil
}

func httpSettings(in Input, proto hcloud.LoadBalancerServiceProtocol) (HTTP, error) {
	svc := in.Service
	var h HTTP
	var err error
	name, err := annotation.LBSvcHTTPCookieName.NonEmptyString(svc)
	if h.CookieName, err = pick(name, err, ""); err != nil {
		return h, err
	}
	life, err := annotation.LBSvcHTTPCookieLifetime.Duration(svc)
	if h.CookieLifetime, err = pick(life, err, 0); err != nil {
		return h, err
	}
	idle, err := annotation.LBSvcHTTPTimeoutIdle.Duration(svc)
	if h.TimeoutIdle, err = pick(idle, err, 0); err != nil {
		return h, err
	}
	if h.TimeoutIdle != 0 && (h.TimeoutIdle < 30*time.Second || h.TimeoutIdle > 300*time.Second) {
		v, _ := annotation.LBSvcHTTPTimeoutIdle.Value(svc)
		return h, &annotation.InvalidError{Name: annotation.LBSvcHTTPTimeoutIdle, Value: v, Accepted: "a duration from 30s to 300s"}
	}
	if h.RedirectHTTP, err = boolOr(annotation.LBSvcRedirectHTTP, svc, false); err != nil {
		return h, err
	}
	if h.StickySessions, err = boolOr(annotation.LBSvcHTTPStickySessions, svc, false); err != nil {
		return h, err
	}
	ct, err := annotation.LBSvcHTTPCertificateType.CertificateType(svc)
	if ct, err = pick(ct, err, hcloud.CertificateTypeUploaded); err != nil {
		return h, err
	}
	if proto == hcloud.LoadBalancerServiceProtocolHTTPS {
		if ct == hcloud.CertificateTypeManaged {
			h.Certificates = []int64{in.ManagedCertificateID}
			return h, nil
		}
		if len(in.CertificateIDs) == 0 {
			return h, fmt.Errorf("%q is https: set %q to the IDs or names of uploaded certificates", annotation.LBSvcProtocol, annotation.LBSvcHTTPCertificates)
		}
		h.Certificates = slices.Sorted(slices.Values(in.CertificateIDs))
		h.Certificates = slices.Compact(h.Certificates)
	}
	return h, nil
}

func healthCheck(in Input) (HealthCheck, error) {
	svc, def := in.Service, in.Defaults
	var hc HealthCheck
	var err error
	hp, err := annotation.LBSvcHealthCheckProtocol.Protocol(svc)
	if hc.Protocol, err = pick(hp, err, hcloud.LoadBalancerServiceProtocolTCP); err != nil {
		return hc, err
	}
	iv, err := annotation.LBSvcHealthCheckInterval.Duration(svc)
	if hc.Interval, err = pick(iv, err, def.HealthCheckInterval); err != nil {
		return hc, err
	}
	to, err := annotation.LBSvcHealthCheckTimeout.Duration(svc)
	if hc.Timeout, err = pick(to, err, def.HealthCheckTimeout); err != nil {
		return hc, err
	}
	re, err := annotation.LBSvcHealthCheckRetries.Int(svc)
	if hc.Retries, err = pick(re, err, def.HealthCheckRetries); err != nil {
		return hc, err
	}
	if hc.Retries < 0 {
		return hc, fmt.Errorf("invalid value for %q: %d (expect a non-negative integer)", annotation.LBSvcHealthCheckRetries, hc.Retries)
	}
	dom, err := annotation.LBSvcHealthCheckHTTPDomain.NonEmptyString(svc)
	if hc.Domain, err = pick(dom, err, ""); err != nil {
		return hc, err
	}
	path, err := annotation.LBSvcHealthCheckHTTPPath.NonEmptyString(svc)
	if hc.Path, err = pick(path, err, ""); err != nil {
		return hc, err
	}
	codes, err := annotation.LBSvcHealthCheckHTTPStatusCodes.CSV(svc)
	if hc.StatusCodes, err = pick(codes, err, nil); err != nil {
		return hc, err
	}
	hc.TLS, err = boolOr(annotation.LBSvcHealthCheckHTTPValidateCertificate, svc, false)
	return hc, err
}
