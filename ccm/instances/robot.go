package instances

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// Event reasons of Robot nodes, as the official CCM names them. Do not rename them.
const (
	// EventInstanceLookupFailed: a node name exists as a cloud and as a Robot server.
	EventInstanceLookupFailed = "InstanceLookupFailed"
	// EventPossibleNodeDeletion: the Robot server of a node's provider ID has another name.
	EventPossibleNodeDeletion = "PossibleNodeDeletion"
	// EventMisconfiguredInternalIP: a forwarded InternalIP has the wrong family or equals an
	// ExternalIP.
	EventMisconfiguredInternalIP = "MisconfiguredInternalIP"
)

// ErrNoRobotClient is wrapped when a node has a Robot provider ID but the CCM has no Robot
// API access (ROBOT_ENABLED unset, or no credentials).
var ErrNoRobotClient = errors.New("no robot client configured: set ROBOT_ENABLED=true with ROBOT_USER and ROBOT_PASSWORD")

// lookupRobot finds the Robot server of a node with a Robot provider ID. A server that is not
// in the account, or whose name differs from the node's (Cluster API reuses Robot servers),
// is nil: the node does not exist any more.
func (i *Instances) lookupRobot(ctx context.Context, node *corev1.Node) (*robot.Server, error) {
	if i.robot == nil {
		return nil, fmt.Errorf("node %q has provider ID %q: %w", node.Name, node.Spec.ProviderID, ErrNoRobotClient)
	}
	n, err := providerid.ToRobotServerNumber(node.Spec.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", node.Name, err)
	}
	s, err := i.robot.Server(ctx, n)
	if errors.Is(err, robot.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node %q: robot server %d: %w", node.Name, n, err)
	}
	if s.Name != node.Name {
		msg := fmt.Sprintf("Robot server %d is named %q, not %q like the node: the node is treated as deleted; rename the server in Robot if it belongs to this node", n, s.Name, node.Name)
		klog.InfoS("Robot server name differs from node name", "node", klog.KObj(node), "serverNumber", n, "serverName", s.Name)
		i.recorder.Event(node, corev1.EventTypeWarning, EventPossibleNodeDeletion, msg)
		return nil, nil
	}
	return &s, nil
}

// robotByName returns the Robot server named like node, nil when there is none or Robot is
// off. refreshOnMiss lets a miss refresh the Robot list (once per name and cache window);
// lookup asks for it only when no cloud server has the name, so cloud nodes do not spend the
// Robot budget.
func (i *Instances) robotByName(ctx context.Context, node *corev1.Node, refreshOnMiss bool) (*robot.Server, error) {
	if i.robot == nil {
		return nil, nil
	}
	s, ok, err := i.robot.ServerByName(ctx, node.Name, refreshOnMiss)
	if err != nil {
		return nil, fmt.Errorf("node %q: robot server by name: %w", node.Name, err)
	}
	if !ok {
		return nil, nil
	}
	return &s, nil
}

// robotShutdown reports whether the Robot server is powered off (reset status "shut off";
// tower models report "not supported" and are never shut down).
func (i *Instances) robotShutdown(ctx context.Context, s *robot.Server) (bool, error) {
	status, err := i.robot.OperatingStatus(ctx, s.Number)
	if err != nil {
		return false, fmt.Errorf("robot server %d: reset status: %w", s.Number, err)
	}
	return status == "shut off", nil
}

// robotMetadata is the node metadata of a Robot server, as the official CCM builds it.
func (i *Instances) robotMetadata(node *corev1.Node, s *robot.Server) *cloudprovider.InstanceMetadata {
	zone := RobotZone(s.DC)
	return &cloudprovider.InstanceMetadata{
		ProviderID:       providerid.FromRobotServerNumber(s.Number),
		InstanceType:     RobotInstanceType(s.Product),
		Zone:             zone,
		Region:           robotRegion(zone),
		NodeAddresses:    i.robotAddresses(node, s),
		AdditionalLabels: map[string]string{LabelProvidedBy: "robot"},
	}
}

var notLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// RobotInstanceType returns the instance type label of a Robot product: spaces become "-",
// other characters a label value cannot hold are dropped ("Server Auction" → "Server-Auction").
func RobotInstanceType(product string) string {
	return notLabelChars.ReplaceAllString(strings.ReplaceAll(product, " ", "-"), "")
}

// robotRegion returns the region of a Robot zone: the part before the first "-".
func robotRegion(zone string) string { return strings.SplitN(zone, "-", 2)[0] }

// RobotZone returns the zone label of a Robot data centre: its lower-cased name
// ("FSN1-DC16" → "fsn1-dc16"). The region is the part before the first "-".
func RobotZone(dc string) string { return strings.ToLower(dc) }

// robotAddresses returns, in the official CCM's order: Hostname; the IPv6 host address
// (server_ipv6_net + "1", families ipv6 and dualstack); the IPv4 (ipv4 and dualstack); and,
// with ROBOT_FORWARD_INTERNAL_IPS, the node's own InternalIPs of the configured family that
// are not also an ExternalIP (others are dropped with a MisconfiguredInternalIP event).
func (i *Instances) robotAddresses(node *corev1.Node, s *robot.Server) []corev1.NodeAddress {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: s.Name}}
	family := i.cfg.AddressFamily
	dual := family == config.AddressFamilyDualStack
	ipv4 := family == config.AddressFamilyIPv4 || dual
	ipv6 := family == config.AddressFamilyIPv6 || dual
	if ipv6 && s.IPv6Net != "" {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: s.IPv6Net + "1"})
	}
	if ipv4 && s.IP != "" {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: s.IP})
	}
	if !i.forwardInternalIPs {
		return addrs
	}
	external := len(addrs)
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		isV4 := net.ParseIP(a.Address).To4() != nil
		var why string
		switch {
		case isV4 && !ipv4:
			why = fmt.Sprintf("Configured InternalIP %s is IPv4 while %s=%s: it is not added as an InternalIP", a.Address, config.EnvHCloudInstancesAddressFamily, family)
		case !isV4 && !ipv6:
			why = fmt.Sprintf("Configured InternalIP %s is IPv6 while %s=%s: it is not added as an InternalIP", a.Address, config.EnvHCloudInstancesAddressFamily, family)
		case containsAddress(addrs[:external], a.Address):
			why = fmt.Sprintf("Configured InternalIP %s is also an ExternalIP: it is not added as an InternalIP", a.Address)
		}
		if why != "" {
			klog.InfoS("Dropping a forwarded InternalIP", "node", klog.KObj(node), "reason", why)
			i.recorder.Event(node, corev1.EventTypeWarning, EventMisconfiguredInternalIP, why)
			continue
		}
		addrs = append(addrs, a)
	}
	return addrs
}

func containsAddress(addrs []corev1.NodeAddress, ip string) bool {
	for _, a := range addrs {
		if a.Address == ip {
			return true
		}
	}
	return false
}

// RobotNodeInput builds the node_labels hook input for node and its Robot server s, with
// what the Robot API gives: the server number as id, its name, the instance type the node gets
// (RobotInstanceType) as type, the region as location, the zone (RobotZone) as datacenter, the
// public IPs (the IPv6 as the host address the node reports), and robot: the product and the
// data center as Robot spells them. Robot has no server labels, network zone, private
// networks or hardware facts: labels and private_networks are empty, server_type is nil.
//
// Only InstanceMetadata calls it: ccm/nodelabels re-labels cloud nodes only, so a dedicated
// node's plugin labels are those of its initialisation.
func RobotNodeInput(node *corev1.Node, s *robot.Server) plugins.NodeInput {
	zone := RobotZone(s.DC)
	in := plugins.NodeInput{
		NodeName:   node.Name,
		NodeLabels: maps.Clone(node.Labels),
		Server: plugins.Server{
			ID:          int64(s.Number),
			Name:        s.Name,
			Type:        RobotInstanceType(s.Product),
			Location:    robotRegion(zone),
			Datacenter:  zone,
			Labels:      map[string]string{},
			PublicIPv4:  s.IP,
			PrivateNets: []plugins.PrivateNet{},
			Robot:       &plugins.RobotServer{Product: s.Product, DataCenter: s.DC},
		},
	}
	if in.NodeLabels == nil {
		in.NodeLabels = map[string]string{}
	}
	if s.IPv6Net != "" {
		in.Server.PublicIPv6 = s.IPv6Net + "1"
	}
	return in
}
