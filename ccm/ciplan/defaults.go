package ciplan

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FirstNodePort is the first placeholder node port plan gives a Service port without one.
const FirstNodePort = 30000

// WithAPIDefaults returns a copy of the Service manifest svc as the kube-apiserver stores it when
// it is applied, so that plan reads the same ports, protocols and policies as the CCM, which
// reads stored Services (and so does the admission webhook: the API server defaults an object
// before validating admission sees it). svc is not modified.
//
// The defaults are those of k8s.io/kubernetes v1.37 pkg/apis/core/v1/defaults.go
// SetDefaults_Service, written out here because k8s.io/kubernetes is no dependency of this
// module (only a convention keeps them in step; TestWithAPIDefaults states them, and the e2e
// differential test TestPlanMatchesCCMOnGeneratedManifests compares plan with the CCM on a real
// apiserver):
//
//   - spec.type "" is ClusterIP;
//   - spec.sessionAffinity "" is None (and None drops sessionAffinityConfig); ClientIP without a
//     timeout gets 10800 s;
//   - every port's protocol "" is TCP and a targetPort 0 or "" is the port;
//   - spec.externalTrafficPolicy "" is Cluster for types NodePort and LoadBalancer;
//   - spec.internalTrafficPolicy unset is Cluster for types ClusterIP, NodePort and LoadBalancer;
//   - spec.allocateLoadBalancerNodePorts unset is true for type LoadBalancer.
//
// What the API server allocates rather than defaults, a manifest cannot say, and plan puts a
// placeholder in its place:
//
//   - a port of a Service of type LoadBalancer without a node port gets FirstNodePort,
//     FirstNodePort+1, ... in port order (unless allocateLoadBalancerNodePorts is false);
//   - spec.ipFamilyPolicy unset is SingleStack and spec.ipFamilies empty is [IPv4], as on a
//     single-stack IPv4 cluster (pkg/registry/core/service/storage/alloc.go; nothing plan or the
//     policy input reads depends on them);
//   - a Service without a UID gets PlaceholderUID's.
func WithAPIDefaults(svc *corev1.Service) *corev1.Service {
	out := svc.DeepCopy()
	if out.UID == "" {
		out.UID = PlaceholderUID(out.Namespace, out.Name)
	}
	setServiceDefaults(&out.Spec)
	allocateNodePorts(&out.Spec)
	if out.Spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		out.Spec.IPFamilyPolicy = &p
	}
	if len(out.Spec.IPFamilies) == 0 {
		out.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return out
}

// setServiceDefaults is SetDefaults_Service's part for the spec; see WithAPIDefaults.
func setServiceDefaults(s *corev1.ServiceSpec) {
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch s.SessionAffinity {
	case corev1.ServiceAffinityNone:
		s.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := s.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := corev1.DefaultClientIPServiceAffinitySeconds
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
	}
	if s.Type == "" {
		s.Type = corev1.ServiceTypeClusterIP
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	external := s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer
	if external && s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.InternalTrafficPolicy == nil && (external || s.Type == corev1.ServiceTypeClusterIP) {
		p := corev1.ServiceInternalTrafficPolicyCluster
		s.InternalTrafficPolicy = &p
	}
	if s.Type == corev1.ServiceTypeLoadBalancer && s.AllocateLoadBalancerNodePorts == nil {
		yes := true
		s.AllocateLoadBalancerNodePorts = &yes
	}
}

// allocateNodePorts gives the ports of a Service of type LoadBalancer without a node port a
// placeholder (see WithAPIDefaults).
func allocateNodePorts(s *corev1.ServiceSpec) {
	if s.Type != corev1.ServiceTypeLoadBalancer || s.AllocateLoadBalancerNodePorts != nil && !*s.AllocateLoadBalancerNodePorts {
		return
	}
	next := int32(FirstNodePort)
	for i := range s.Ports {
		if s.Ports[i].NodePort == 0 {
			s.Ports[i].NodePort = next
			next++
		}
	}
}

// PlaceholderUID is the UID plan gives a Service manifest without one: a UUID-shaped hash of
// namespace/name, stable across runs (the cluster assigns the real one on apply, so the default
// load balancer name "a<uid>" in a plan is a placeholder too).
func PlaceholderUID(namespace, name string) types.UID {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	x := hex.EncodeToString(h[:16])
	return types.UID(x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32])
}
