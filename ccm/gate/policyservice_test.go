package gate_test

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
)

// TestPolicyService_leavesOutTheRetryAnnotation: the CCM's retry annotation is no policy input,
// so a retry of an unchanged Service has the digest of its denial (issue 40 §2); any other
// annotation is.
func TestPolicyService_leavesOutTheRetryAnnotation(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{
		"load-balancer.hetzner.cloud/type": "lb11", annotation.PolicyRetry: "policy revision 0123 at 2026-11-28T10:00:00Z",
	}}}
	got := gate.PolicyService(svc, nil).Annotations
	if want := map[string]string{"load-balancer.hetzner.cloud/type": "lb11"}; !maps.Equal(got, want) {
		t.Errorf("annotations in the policy input = %v, want %v", got, want)
	}
	if _, ok := svc.Annotations[annotation.PolicyRetry]; !ok {
		t.Error("PolicyService changed the Service's own annotations")
	}
}

// TestPolicyService_loadBalancerClass: input.service.load_balancer_class is the Service's
// spec.loadBalancerClass, "" without one (issue 43).
func TestPolicyService_loadBalancerClass(t *testing.T) {
	class := "example.com/hetzner"
	tests := []struct {
		name  string
		class *string
		want  string
	}{
		{name: "no class", class: nil, want: ""},
		{name: "a class", class: &class, want: class},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: tc.class}}
			if got := gate.PolicyService(svc, nil).LoadBalancerClass; got != tc.want {
				t.Errorf("load_balancer_class = %q, want %q", got, tc.want)
			}
		})
	}
}
