package ciplan

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestWithAPIDefaults (issue 29 item 3): a manifest reads as the API server stores it
// (k8s.io/kubernetes pkg/apis/core/v1 SetDefaults_Service, v1.37), and the manifest is not
// modified.
func TestWithAPIDefaults(t *testing.T) {
	yes, no := true, false
	cluster, local := corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal
	single, dual := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack
	timeout, short := corev1.DefaultClientIPServiceAffinitySeconds, int32(60)
	ipv4 := []corev1.IPFamily{corev1.IPv4Protocol}
	tests := []struct {
		name string
		in   corev1.ServiceSpec
		want corev1.ServiceSpec
	}{
		{"a load balancer with every default omitted",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443, NodePort: 31443}, {Port: 8080}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
				{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80), NodePort: FirstNodePort},
				{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443), NodePort: 31443},
				{Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080), NodePort: FirstNodePort + 1},
			}, SessionAffinity: corev1.ServiceAffinityNone, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				InternalTrafficPolicy: &cluster, AllocateLoadBalancerNodePorts: &yes, IPFamilyPolicy: &single, IPFamilies: ipv4}},
		{"what the manifest sets stays",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
				SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &short}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: &local, AllocateLoadBalancerNodePorts: &no,
				IPFamilyPolicy: &dual, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}},
				SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &short}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: &local, AllocateLoadBalancerNodePorts: &no,
				IPFamilyPolicy: &dual, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}}},
		{"ClientIP affinity without a timeout gets 10800 s",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: &cluster, AllocateLoadBalancerNodePorts: &yes,
				IPFamilyPolicy: &single, IPFamilies: ipv4}},
		{"affinity None drops its config",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone, SessionAffinityConfig: &corev1.SessionAffinityConfig{}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: &cluster, AllocateLoadBalancerNodePorts: &yes,
				IPFamilyPolicy: &single, IPFamilies: ipv4}},
		{"no type is ClusterIP: no external policy, no node ports",
			corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster, IPFamilyPolicy: &single, IPFamilies: ipv4}},
		{"ExternalName gets no traffic policies",
			corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
			corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: corev1.ServiceAffinityNone,
				IPFamilyPolicy: &single, IPFamilies: ipv4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: tc.in}
			before := in.DeepCopy()
			got := WithAPIDefaults(in)
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if got.UID != PlaceholderUID("shop", "web") {
				t.Errorf("UID %q, want the placeholder", got.UID)
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("the manifest was modified (-before +after):\n%s", diff)
			}
		})
	}
}

// TestRun_PolicySeesDefaults: a port without protocol reaches the policy as "TCP" and an omitted
// externalTrafficPolicy as "Cluster", as in the CCM (issue 29 item 3).
func TestRun_PolicySeesDefaults(t *testing.T) {
	m := Manifests{Services: []Manifest{groupManifest("a", 1, "web", 80)}}
	m.Services[0].Service.Spec.Ports[0].Protocol = ""
	delete(m.Services[0].Service.Annotations, string(annotation.LBGroup))
	seen := &inputsSeen{}
	r := Run(t.Context(), m, Options{Config: configWithLocation(), Decider: seen})
	if len(r.Services) != 1 || r.Services[0].Error != "" || len(seen.services) == 0 {
		t.Fatalf("report %+v", r)
	}
	for _, s := range seen.services {
		if s.Ports[0].Protocol != "TCP" || s.ExternalTrafficPolicy != "Cluster" {
			t.Errorf("input.service ports %+v, external_traffic_policy %q; want protocol TCP and Cluster", s.Ports, s.ExternalTrafficPolicy)
		}
	}
}

// inputsSeen records input.service of every decision and allows it.
type inputsSeen struct{ services []*input.Service }

func (s *inputsSeen) Decide(_ context.Context, in input.Input) policy.Decision {
	s.services = append(s.services, in.Service)
	return policy.Decision{Allowed: true}
}

func configWithLocation() config.Config {
	return config.Config{LoadBalancer: config.LoadBalancer{Location: "fsn1"}}
}

// TestRun_CertificateBeforeCreate (issue 29 item 5): plan lists a managed certificate created
// with the load balancer before the create, as the CCM sends it.
func TestRun_CertificateBeforeCreate(t *testing.T) {
	m := Manifests{Services: []Manifest{groupManifest("web", 1, "", 443)}}
	svc := m.Services[0].Service
	svc.Annotations = map[string]string{
		string(annotation.LBSvcProtocol): "https", string(annotation.LBSvcHTTPCertificateType): "managed",
		string(annotation.LBSvcHTTPManagedCertificateDomains): "shop.example.com",
	}
	r := Run(t.Context(), m, Options{Config: configWithLocation(), Decider: &inputsSeen{}})
	if len(r.Services) != 1 || r.Services[0].Error != "" {
		t.Fatalf("report %+v", r)
	}
	var got []string
	for _, st := range r.Services[0].Steps {
		got = append(got, st.Operation)
	}
	if want := []string{"create_managed_certificate", "create"}; !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
}
