package lbplan

import (
	"net"

	corev1 "k8s.io/api/core/v1"
)

// Status builds the Service status of the load balancer a (NewActual, or the state its
// mutations left), as the official CCM does: the hostname alone when
// one is set (HostnameSet, an empty one too); else the public IPv4 and (unless disabled) IPv6 when the public interface is
// enabled, then the private IPs unless private ingress is disabled. ipMode is Proxy with the
// proxy protocol, else VIP. It is pure; a nil a gives an empty status.
func Status(a *Actual, o StatusOptions) *corev1.LoadBalancerStatus {
	st := &corev1.LoadBalancerStatus{}
	if a == nil {
		return st
	}
	if o.HostnameSet || o.Hostname != "" {
		st.Ingress = []corev1.LoadBalancerIngress{{Hostname: o.Hostname}}
		return st
	}
	mode := corev1.LoadBalancerIPModeVIP
	if o.ProxyProtocol {
		mode = corev1.LoadBalancerIPModeProxy
	}
	add := func(ip string) {
		m := mode
		st.Ingress = append(st.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: &m})
	}
	if a.PublicInterface {
		if ip := net.ParseIP(a.IPv4); ip != nil && !ip.IsUnspecified() {
			add(ip.String())
		}
		if ip := net.ParseIP(a.IPv6); !o.DisableIPv6 && ip != nil && !ip.IsUnspecified() {
			add(ip.String())
		}
	}
	if !o.DisablePrivateIngress {
		for _, n := range a.Networks {
			if n.IP != nil {
				add(n.IP.String())
			}
		}
	}
	return st
}
