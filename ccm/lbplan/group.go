package lbplan

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The labels that identify the shared load balancer of a group (docs/shared-load-balancers.md).
// A group load balancer carries both and never LabelServiceUID; it is found by both, so two
// clusters in one Hetzner project with the same group name do not share.
//
// They MUST not change: load balancers in the field carry them.
const (
	LabelGroup   = "hcloud-policy-ccm.io/load-balancer-group"
	LabelCluster = "hcloud-policy-ccm.io/cluster"
)

// LabelGroupNamespace records the home namespace of a group on its load balancer: the namespace
// of its oldest member when the load balancer was created (or, for a load balancer created
// before this label existed, of its oldest member at the first sync that saw it without).
// Leadership never moves it (issue 34 §2): the group's leader is its oldest member in this
// namespace (GroupLeader), and input.group.namespace says it to the policy. It is no identity
// label (the load balancer is found by LabelGroup and LabelCluster).
//
// It MUST not change: load balancers in the field carry it.
const LabelGroupNamespace = "hcloud-policy-ccm.io/group-namespace"

// maxNameLength is the longest load balancer name the CCM sends (plugins.ValidateLoadBalancerName).
const maxNameLength = 128

// GroupLoadBalancerName is the default name of the load balancer of group in cluster,
// "<cluster>-group-<group>", cut to the CCM's name limit (128 characters) and without trailing
// dashes.
func GroupLoadBalancerName(cluster, group string) string {
	n := cluster + "-group-" + group
	if len(n) > maxNameLength {
		n = strings.TrimRight(n[:maxNameLength], "-")
	}
	return n
}

// Key is the namespace/name of svc, how events and the group input name a Service.
func Key(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }
