package plugins

// Hook names: the stable names of plugin hooks, used in flags, metrics, events and the CLI.
const (
	HookNodeLabels       = "node_labels"
	HookLoadBalancerName = "load_balancer_name"
)

// NodeInput is the request of the node_labels hook (JSON in guest memory).
//
// Field names are the plugin contract (docs/plugins.md); they MUST not be renamed.
type NodeInput struct {
	NodeName   string            `json:"node_name"`
	NodeLabels map[string]string `json:"node_labels"`
	Server     Server            `json:"server"`
}

// Server is the Hetzner Cloud server behind a node.
type Server struct {
	ID          int64             `json:"id"`
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Location    string            `json:"location"`
	NetworkZone string            `json:"network_zone"`
	Labels      map[string]string `json:"labels"`
	PublicIPv4  string            `json:"public_ipv4,omitempty"`
	PublicIPv6  string            `json:"public_ipv6,omitempty"`
	PrivateNets []PrivateNet      `json:"private_networks"`
}

// PrivateNet is a server's attachment to a private network.
type PrivateNet struct {
	NetworkID int64  `json:"network_id"`
	IP        string `json:"ip"`
}

// NodeLabelsReply is the reply of the node_labels hook.
type NodeLabelsReply struct {
	Labels map[string]string `json:"labels,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// LoadBalancerNameInput is the request of the load_balancer_name hook.
type LoadBalancerNameInput struct {
	ClusterName string  `json:"cluster_name"`
	DefaultName string  `json:"default_name"`
	Service     Service `json:"service"`
}

// Service is the Kubernetes Service a load balancer is named for.
type Service struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// LoadBalancerNameReply is the reply of the load_balancer_name hook.
type LoadBalancerNameReply struct {
	Name  string `json:"name,omitempty"`
	Error string `json:"error,omitempty"`
}
