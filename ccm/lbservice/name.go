package lbservice

import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"

	corev1 "k8s.io/api/core/v1"
)

// AnnotatedName returns the name annotation of svc, and true when it is set and not empty:
// that name is the load balancer's and renames an existing one with another name. Without
// it the CCM asks the naming plugin (ccm/loadbalancer), and else takes the default name
// (cloudprovider.DefaultLoadBalancerName), which never renames, as in the official CCM. The CCM
// and `plan` (ccm/ciplan) both call it, so they choose the same name.
func AnnotatedName(svc *corev1.Service) (string, bool) {
	n, err := annotation.LBName.NonEmptyString(svc)
	return n, err == nil
}

// GroupName returns the name of the load balancer of group in cluster whose leader is leader:
// the leader's name annotation (AnnotatedName), else GroupLoadBalancerName. The CCM and `plan`
// both call it.
func GroupName(leader *corev1.Service, cluster, group string) string {
	if n, ok := AnnotatedName(leader); ok {
		return n
	}
	return lbplan.GroupLoadBalancerName(cluster, group)
}
