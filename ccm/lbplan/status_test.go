package lbplan_test

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

func TestStatus(t *testing.T) {
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	ing := func(ip string, mode corev1.LoadBalancerIPMode) corev1.LoadBalancerIngress {
		return corev1.LoadBalancerIngress{IP: ip, IPMode: &mode}
	}
	tests := []struct {
		name string
		lb   *hcloud.LoadBalancer
		opts lbplan.StatusOptions
		want []corev1.LoadBalancerIngress
	}{
		{"a public load balancer shows IPv4 and IPv6", newLB(), lbplan.StatusOptions{},
			[]corev1.LoadBalancerIngress{ing("203.0.113.10", vip), ing("2001:db8::1", vip)}},
		{"disabled IPv6 is left out", newLB(), lbplan.StatusOptions{DisableIPv6: true},
			[]corev1.LoadBalancerIngress{ing("203.0.113.10", vip)}},
		{"private IPs follow the public ones", newLB(attached("10.0.0.3")), lbplan.StatusOptions{},
			[]corev1.LoadBalancerIngress{ing("203.0.113.10", vip), ing("2001:db8::1", vip), ing("10.0.0.3", vip)}},
		{"disabled private ingress leaves private IPs out", newLB(attached("10.0.0.3")), lbplan.StatusOptions{DisablePrivateIngress: true},
			[]corev1.LoadBalancerIngress{ing("203.0.113.10", vip), ing("2001:db8::1", vip)}},
		{"a disabled public interface shows only private IPs", newLB(attached("10.0.0.3"), func(lb *hcloud.LoadBalancer) { lb.PublicNet.Enabled = false }), lbplan.StatusOptions{},
			[]corev1.LoadBalancerIngress{ing("10.0.0.3", vip)}},
		{"proxy protocol sets ipMode Proxy", newLB(), lbplan.StatusOptions{ProxyProtocol: true, DisableIPv6: true},
			[]corev1.LoadBalancerIngress{ing("203.0.113.10", proxy)}},
		{"a hostname replaces the IPs", newLB(attached("10.0.0.3")), lbplan.StatusOptions{Hostname: "lb.example.com"},
			[]corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}},
		{"no load balancer gives an empty status", nil, lbplan.StatusOptions{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lbplan.Status(lbplan.NewActual(tc.lb), tc.opts)
			if diff := cmp.Diff(tc.want, got.Ingress); diff != "" {
				t.Errorf("ingress (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMutation_ApplyIsPureAndFeedsTheStatus: Apply never modifies its argument, and the status
// of the state it returns is the status the load balancer has after the mutation.
func TestMutation_ApplyIsPureAndFeedsTheStatus(t *testing.T) {
	vip := corev1.LoadBalancerIPModeVIP
	ing := func(ips ...string) []corev1.LoadBalancerIngress {
		var out []corev1.LoadBalancerIngress
		for _, ip := range ips {
			out = append(out, corev1.LoadBalancerIngress{IP: ip, IPMode: &vip})
		}
		return out
	}
	tests := []struct {
		name string
		m    lbplan.Mutation
		want []corev1.LoadBalancerIngress
	}{
		{"disabling the public interface leaves the private IP", lbplan.DisablePublicInterface{}, ing("10.0.0.3")},
		{"detaching the network leaves the public IPs", lbplan.DetachNetwork{NetworkID: 5}, ing("203.0.113.10", "2001:db8::1")},
		{"an attachment with a fixed IP shows it", lbplan.AttachNetwork{Network: lbplan.Attachment{ID: 6, IP: net.ParseIP("10.1.0.9")}},
			ing("203.0.113.10", "2001:db8::1", "10.0.0.3", "10.1.0.9")},
		{"a new listener changes no address", lbplan.AddService{Listener: lbplan.Listener{ListenPort: 443}}, ing("203.0.113.10", "2001:db8::1", "10.0.0.3")},
		{"nothing is left after a delete", lbplan.Delete{Name: "web-lb"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := lbplan.NewActual(newLB(attached("10.0.0.3")))
			after := tc.m.Apply(before)
			if diff := cmp.Diff(lbplan.NewActual(newLB(attached("10.0.0.3"))), before); diff != "" {
				t.Errorf("%s.Apply modified its argument (-want +got):\n%s", tc.m.Label(), diff)
			}
			if diff := cmp.Diff(tc.want, lbplan.Status(after, lbplan.StatusOptions{}).Ingress); diff != "" {
				t.Errorf("status after %s (-want +got):\n%s", tc.m.Label(), diff)
			}
		})
	}
	if !(lbplan.AttachNetwork{Network: lbplan.Attachment{ID: 6}}).Apply(lbplan.NewActual(newLB())).PrivateIPUnknown() {
		t.Error("an attachment without a fixed IP must be modelled as unknown to the plan")
	}
}
