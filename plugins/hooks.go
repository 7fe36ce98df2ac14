package plugins

import "github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"

// Hook names: the stable names of plugin hooks, used in flags, metrics, events and the CLI.
const (
	HookNodeLabels       = "node_labels"
	HookLoadBalancerName = "load_balancer_name"
)

// The request and reply types are defined once, in the guest SDK (which must not import this
// package: it would link wazero into every plugin). These aliases make them the host's types
// too, so host and guest cannot drift apart.
//
// Field names are the plugin contract (docs/plugins.md); they MUST not be renamed.
type (
	// NodeInput is the request of the node_labels hook (JSON in guest memory).
	NodeInput = sdk.NodeInput
	// Server is the Hetzner server (cloud or Robot) behind a node.
	Server = sdk.Server
	// ServerType is the hardware of a server's type (cores, memory, disk, architecture, CPU type).
	ServerType = sdk.ServerType
	// RobotServer is what Robot tells about a dedicated server (product, data center).
	RobotServer = sdk.RobotServer
	// PrivateNet is a server's attachment to a private network.
	PrivateNet = sdk.PrivateNet
	// NodeLabelsReply is the reply of the node_labels hook.
	NodeLabelsReply = sdk.NodeLabelsReply
	// LoadBalancerNameInput is the request of the load_balancer_name hook.
	LoadBalancerNameInput = sdk.LoadBalancerNameInput
	// Service is the Kubernetes Service a load balancer is named for.
	Service = sdk.Service
	// LoadBalancerNameReply is the reply of the load_balancer_name hook.
	LoadBalancerNameReply = sdk.LoadBalancerNameReply
)
