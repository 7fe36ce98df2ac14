package loadbalancer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
)

// Event reasons of Robot targets (official CCM names). They MUST not change.
const (
	ReasonInternalIPNotConfigured = lbplan.ReasonInternalIPNotConfigured
	ReasonServerNotFound          = lbplan.ReasonServerNotFound
)

// robotTargets resolves Robot nodes (ROBOT_ENABLED).
type robotTargets struct {
	// servers is nil without Robot credentials: only InternalIPs can be targets then.
	servers *robot.Client
}

// robotNodes resolves the Robot nodes among nodes: the Robot server list is read (from the
// client's cache) only when there is one. It returns nil without Options.Robot. Robot nodes whose
// provider ID does not parse are returned for the UnknownProviderIDPrefix warning
// (advisoryWarnings).
func (l *LoadBalancers) robotNodes(ctx context.Context, nodes []*corev1.Node) (map[string]*lbplan.RobotNode, []unknownNode, error) {
	if l.robot == nil {
		return nil, nil, nil
	}
	out := map[string]*lbplan.RobotNode{}
	var unknown []unknownNode
	for _, n := range nodes {
		if n == nil || !providerid.IsRobot(n.Spec.ProviderID) {
			continue
		}
		num, err := providerid.ToRobotServerNumber(n.Spec.ProviderID)
		if err != nil {
			unknown = append(unknown, unknownNode{node: n, err: err})
			continue
		}
		out[n.Name] = &lbplan.RobotNode{Number: num, NoAPI: l.robot.servers == nil, InternalIP: firstInternalIP(n)}
	}
	if len(out) == 0 || l.robot.servers == nil {
		return out, unknown, nil
	}
	servers, err := read(ctx, "robot servers", func() ([]robot.Server, error) { return l.robot.servers.Servers(ctx) })
	if err != nil {
		return nil, nil, fmt.Errorf("robot server list for the load balancer's IP targets: %w", err)
	}
	ips := make(map[int]string, len(servers))
	for _, s := range servers {
		ips[s.Number] = s.IP
	}
	for _, rn := range out {
		rn.PublicIP = ips[rn.Number]
	}
	return out, unknown, nil
}

func firstInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// reportTargetProblems emits the official CCM's Warning events for Robot nodes that are no
// target or not on the IP wanted, and MaxTargetsReached for IP targets beyond max_targets.
func (l *LoadBalancers) reportTargetProblems(ctx context.Context, svc *corev1.Service, name string, d lbplan.Desired, skipped []lbplan.IPTarget) {
	for _, p := range d.TargetProblems {
		if p.Reason == ReasonInternalIPNotConfigured {
			l.warn(ctx, svc, p.Reason, p.Message)
			continue
		}
		l.warn(ctx, nodeRef(p.Node), p.Reason, p.Message)
	}
	for _, t := range skipped {
		msg := fmt.Sprintf("load balancer %s reached max_targets %d of type %s: node %s (IP %s) not added", name, d.MaxTargets, d.Type, t.Node, t.IP)
		l.warn(ctx, nodeRef(t.Node), ReasonMaxTargetsReached, msg)
		l.warn(ctx, svc, ReasonMaxTargetsReached, msg)
	}
}
