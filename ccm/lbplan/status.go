package lbplan

import (
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
)

// Status builds the Service status of lb, as the official CCM does: the hostname alone when
// one is set; else the public IPv4 and (unless disabled) IPv6 when the public interface is
// enabled, then the private IPs unless private ingress is disabled. ipMode is Proxy with the
// proxy protocol, else VIP. It is pure; a nil lb gives an empty status.
func Status(lb *hcloud.LoadBalancer, o StatusOptions) *corev1.LoadBalancerStatus {
	st := &corev1.LoadBalancerStatus{}
	if lb == nil {
		return st
	}
	if o.Hostname != "" {
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
	if lb.PublicNet.Enabled {
		if ip := lb.PublicNet.IPv4.IP; ip != nil && !ip.IsUnspecified() {
			add(ip.String())
		}
		if ip := lb.PublicNet.IPv6.IP; !o.DisableIPv6 && ip != nil && !ip.IsUnspecified() {
			add(ip.String())
		}
	}
	if !o.DisablePrivateIngress {
		for _, pn := range lb.PrivateNet {
			if pn.IP != nil {
				add(pn.IP.String())
			}
		}
	}
	return st
}
