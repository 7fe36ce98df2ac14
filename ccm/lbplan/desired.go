// Package lbplan is the pure load balancer planner: Desired (what a Service asks for, built by
// ccm/lbservice from its annotations and the environment), Actual (what Hetzner has), and
// Compute, which turns the difference into an ordered list of typed mutations for the executor. Each mutation says what it does (Apply) and how it is sent
// (Request: an apireq.Request, data the executor sends); Plan.Requests groups them into Batches. Nothing here touches the network.
//
// It builds policy inputs from the leaf package policy/input and links neither the policy
// engine, OPA nor client-go, and neither does ccm/routeplan (TestPlannersAreLight).
//
// The kinds of mutation live in mutation.go, except those with a file of their own
// (change_dns_ptr.go, robot.go's AddIPTarget); Kinds lists them all. Plan.Requests groups a
// plan into the API requests that run it (send.go: what rides along with a create).
//
// The load balancer a group of Services shares is planned by the same Compute from
// lbgroup.GroupDesired (ccm/lbgroup); this package keeps the group's identity labels
// (LabelGroup, LabelCluster, LabelGroupNamespace) and its reserved name (group.go), which every
// load balancer's plan checks.
//
// Start with lbservice.NewDesired, NewActual and Compute; Plan.Steps gives each mutation's
// policy view.
package lbplan

import (
	"net"

	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
)

// LabelServiceUID is the Hetzner label that identifies the load balancer of a Service.
//
// It MUST not change: it is the official CCM's identity label, and load balancers in the field
// carry it.
const LabelServiceUID = "hcloud-ccm/service-uid"

// LabelExcludeFromLB excludes a node from load balancer targets (upstream well-known label).
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// DefaultType is the load balancer type used when neither the annotation nor
// HCLOUD_LOAD_BALANCERS_TYPE is set (official behaviour, with a LoadBalancerTypeUnconfigured
// warning).
const DefaultType = "lb11"

// Node is a Kubernetes node already resolved to its Hetzner server by the caller: a cloud
// server (ServerID) or a Robot dedicated server (Robot, ServerID 0), which becomes an IP
// target.
type Node struct {
	Name     string
	ServerID int64
	Labels   map[string]string
	Robot    *RobotNode
}

// ClusterNetwork is the cluster's private network (HCLOUD_NETWORK).
type ClusterNetwork struct {
	ID      int64
	Name    string
	IPRange string
	// Subnets are the ranges of the network's subnets; a private-subnet-ip-range that is not
	// one of them is refused before planning. Nil skips the check.
	Subnets []string
}

// Desired is the load balancer a Service asks for. A setting that neither an annotation nor the
// environment sets is nil (or false for TypeSet): the planner leaves it alone on an existing load
// balancer, as the official CCM does; removing an annotation restores nothing.
type Desired struct {
	Name   string
	Rename bool
	// Labels are set on the load balancer; other labels on it are kept.
	Labels map[string]string
	// Type is the type to create with.
	Type string
	// TypeSet is true when the type annotation or HCLOUD_LOAD_BALANCERS_TYPE is set: only then
	// is an existing load balancer's type changed.
	TypeSet bool
	// TypeUnconfigured is true when DefaultType was used (event LoadBalancerTypeUnconfigured).
	TypeUnconfigured bool
	// MaxTargets is the max_targets of the type, set by the caller from the type list; 0 = no limit.
	MaxTargets int
	// Location and NetworkZone place a new load balancer (exactly one is set); they are
	// create-only: a change on an existing load balancer is ignored, as with the official CCM.
	Location    string
	NetworkZone string
	// Algorithm is nil when not set: the API default on create, left alone after.
	Algorithm *hcloud.LoadBalancerAlgorithmType
	// PublicInterface is nil when disable-public-network and its default are not set.
	PublicInterface *bool
	// Network is the attachment wanted; nil for none.
	Network *Attachment
	// IPv4RDNS and IPv6RDNS are the wanted PTR records; nil leaves them alone.
	IPv4RDNS, IPv6RDNS *string
	// DeleteProtection is the wanted Hetzner delete protection (annotation
	// LBDeleteProtection); nil leaves it alone.
	DeleteProtection *bool
	Services         []Listener // sorted by ListenPort
	Targets          []Target   // sorted by ServerID
	// IPTargets are the targets of Robot nodes, sorted by IP.
	IPTargets []IPTarget
	// TargetProblems are Robot nodes left out of IPTargets or targeted on another IP than
	// wanted, for the caller's Warning events.
	TargetProblems []TargetProblem
	// ManagedCertificate is set for https with certificate-type managed.
	ManagedCertificate *ManagedCertificate
	// UnsupportedPorts are Service ports with another protocol than TCP (not load balanced).
	UnsupportedPorts []corev1.ServicePort
	Status           StatusOptions
}

// PublicInterfaceOnCreate is the public interface a new load balancer gets: enabled unless
// disabled explicitly.
func (d Desired) PublicInterfaceOnCreate() bool {
	return d.PublicInterface == nil || *d.PublicInterface
}

// Attachment is a wanted network attachment.
type Attachment struct {
	ID      int64
	IPRange string // the network's range, for the policy view
	// IP is the wanted private IP; nil lets the API pick one.
	IP net.IP
	// Subnet is the subnet to attach to; nil lets the API pick one. Used only when attaching.
	Subnet *net.IPNet
}

// Listener is one listener. Protocol, ports and the health check's protocol and port are always
// managed. Every pointer (and nil slice) is optional: nil means "not set by annotation or
// environment", it is neither compared nor sent, and the load balancer keeps what it has, as
// with the official CCM.
type Listener struct {
	Protocol        hcloud.LoadBalancerServiceProtocol
	ListenPort      int
	DestinationPort int
	Proxyprotocol   *bool
	HTTP            HTTP // managed for http and https only
	HealthCheck     HealthCheck
}

// HTTP are the HTTP settings of a listener; every field is optional.
type HTTP struct {
	CookieName     *string
	CookieLifetime *time.Duration
	TimeoutIdle    *time.Duration
	Certificates   []int64 // sorted; nil = not set
	RedirectHTTP   *bool
	StickySessions *bool
}

// IsSet reports whether any HTTP setting is set (the official CCM then sends an http object).
func (h HTTP) IsSet() bool {
	return h.CookieName != nil || h.CookieLifetime != nil || h.TimeoutIdle != nil || h.Certificates != nil ||
		h.RedirectHTTP != nil || h.StickySessions != nil
}

// HealthCheck is the health check of a listener. Protocol and Port are always managed; the
// rest is optional. The HTTP fields are managed only for http and https health checks.
type HealthCheck struct {
	Protocol hcloud.LoadBalancerServiceProtocol
	Port     int
	Interval *time.Duration
	Timeout  *time.Duration
	Retries  *int
	Domain   *string
	Path     *string
	// StatusCodes nil = not set.
	StatusCodes []string
	TLS         *bool
}

// Target is a server target.
type Target struct {
	ServerID     int64
	UsePrivateIP bool
	Node         string // node name, for events; not compared
}

// StatusOptions shape the Service status built from the load balancer.
type StatusOptions struct {
	// Hostname replaces the IPs when HostnameSet (the annotation is set, an empty value too).
	Hostname              string
	HostnameSet           bool
	DisableIPv6           bool
	DisablePrivateIngress bool
	ProxyProtocol         bool
}
