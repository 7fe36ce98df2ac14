package loadbalancer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// TestServes: drift repair and the audit judge class-less Services unless
// --load-balancer-class-only, and Services of the class served, never another class (issue 43).
func TestServes(t *testing.T) {
	ours, cilium := "example.com/hetzner", "io.cilium/l2-announcer"
	svc := func(typ corev1.ServiceType, class *string) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
	}
	lb := corev1.ServiceTypeLoadBalancer
	tests := []struct {
		name      string
		class     string
		classOnly bool
		svc       *corev1.Service
		want      bool
	}{
		{name: "nil", svc: nil, want: false},
		{name: "no class, no class served", svc: svc(lb, nil), want: true},
		{name: "ClusterIP", svc: svc(corev1.ServiceTypeClusterIP, nil), want: false},
		{name: "a class while none is served", svc: svc(lb, &ours), want: false},
		{name: "our class", class: ours, svc: svc(lb, &ours), want: true},
		{name: "another class", class: ours, svc: svc(lb, &cilium), want: false},
		{name: "no class beside our class", class: ours, svc: svc(lb, nil), want: true},
		{name: "no class, class-only", class: ours, classOnly: true, svc: svc(lb, nil), want: false},
		{name: "our class, class-only", class: ours, classOnly: true, svc: svc(lb, &ours), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &LoadBalancers{cfg: config.LoadBalancer{Class: tc.class}, classOnly: tc.classOnly}
			if got := l.Serves(tc.svc); got != tc.want {
				t.Errorf("Serves = %v, want %v", got, tc.want)
			}
		})
	}
}
