// Package lbplan is the pure load balancer planner: Desired (what a Service asks for), Actual
// (what Hetzner has), and Compute, which turns the difference into an ordered list of typed
// mutations for the executor. Each mutation says what it does (Apply) and how it is sent
// (Request: an apireq.Request, data the executor sends). Nothing here touches the network.
//
// It builds policy inputs from the leaf package policy/input and links neither the policy
// engine, OPA nor client-go, and neither does ccm/routeplan (TestPlannersAreLight).
//
// The kinds of mutation live in mutation.go, except those with a file of their own
// (change_dns_ptr.go, robot.go's AddIPTarget); Kinds lists them all. Plan.Requests groups a
// plan into the API requests that run it (send.go: what rides along with a create).
//
// The load balancer a group of Services shares (group.go) is planned by the same Compute from
// GroupDesired: the leader's desired state with the union of the members' listeners that
// AdmitGroup admits (port conflicts, capacity), and GroupView is its input.group.
//
// Start with NewDesired, NewActual and Compute; Plan.Steps gives each mutation's policy view.
package lbplan

import (
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
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

// DesiredInput is everything NewDesired needs. The Service is read, never modified.
type DesiredInput struct {
	Service *corev1.Service
	// Name is the load balancer name (annotation, plugin or default).
	Name string
	// Rename is true when Name came from the name annotation or the naming plugin: an existing
	// load balancer with another name is renamed. A default name never renames (official).
	Rename   bool
	Nodes    []Node
	Defaults config.LoadBalancer
	// Network is nil when no network is configured.
	Network *ClusterNetwork
	// CertificateIDs are the uploaded certificates of the http-certificates annotation, resolved
	// to IDs by the caller.
	CertificateIDs []int64
	// ManagedCertificateID is the managed certificate carrying the Service's UID label, found
	// by the caller; PendingCertificateID (0) when there is none yet.
	ManagedCertificateID int64
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

// NewDesired builds the desired load balancer of in.Service from its annotations, the
// environment defaults and the nodes. Errors are annotation errors (*annotation.InvalidError)
// or invalid combinations naming the annotation.
func NewDesired(in DesiredInput) (Desired, error) {
	svc := in.Service
	if svc == nil {
		return Desired{}, errors.New("service is nil")
	}
	d := Desired{
		Name:   in.Name,
		Rename: in.Rename,
		Labels: map[string]string{LabelServiceUID: string(svc.UID)},
	}
	steps := []func(*Desired, DesiredInput) error{
		desiredType, desiredPlacement, desiredAlgorithm, desiredNetwork, desiredRDNS,
		desiredProtection, desiredStatus, desiredServices, desiredManagedCertificate, desiredTargets,
	}
	for _, step := range steps {
		if err := step(&d, in); err != nil {
			return Desired{}, err
		}
	}
	return d, nil
}

// pick implements the three-way switch: annotation, else default, else the annotation's error.
func pick[T any](v T, err error, def T) (T, error) {
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, annotation.ErrNotSet):
		return def, nil
	default:
		return def, err
	}
}

func isSet(err error) bool { return !errors.Is(err, annotation.ErrNotSet) }

// desiredType: the type annotation, else HCLOUD_LOAD_BALANCERS_TYPE, else DefaultType with
// TypeUnconfigured; an empty annotation counts as no type at all (DefaultType, not the
// variable's), as with the official CCM. Names are case-sensitive (checked against the type list
// by the caller).
func desiredType(d *Desired, in DesiredInput) error {
	d.Type, d.TypeSet = ConfiguredType(in.Service, in.Defaults)
	if !d.TypeSet {
		d.Type, d.TypeUnconfigured = DefaultType, true
	}
	return nil
}

// ConfiguredType is the type the type annotation or else HCLOUD_LOAD_BALANCERS_TYPE asks for;
// ok is false when neither does (the official CCM then warns LoadBalancerTypeUnconfigured). An
// annotation that is set but empty (after trimming) hides the variable, as in the official
// CCM, where the annotation's value replaces the variable's before the empty check.
func ConfiguredType(svc *corev1.Service, defaults config.LoadBalancer) (typ string, ok bool) {
	if t, set := annotation.LBType.Value(svc); set {
		t = strings.TrimSpace(t)
		return t, t != ""
	}
	return defaults.Type, defaults.Type != ""
}

// desiredPlacement follows the official CCM: the location annotation (empty unsets the
// environment's location) beats HCLOUD_LOAD_BALANCERS_LOCATION; the network-zone annotation
// beats HCLOUD_LOAD_BALANCERS_NETWORK_ZONE; a location beats any network zone. Whether one is
// needed is decided by Compute (only to create).
func desiredPlacement(d *Desired, in DesiredInput) error {
	d.Location = in.Defaults.Location
	if v, ok := annotation.LBLocation.Value(in.Service); ok {
		d.Location = strings.TrimSpace(v)
	}
	d.NetworkZone = in.Defaults.NetworkZone
	if v, ok := annotation.LBNetworkZone.Value(in.Service); ok {
		d.NetworkZone = strings.TrimSpace(v)
	}
	if d.Location != "" {
		d.NetworkZone = ""
	}
	return nil
}

// desiredAlgorithm: the annotation (any case), else HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE, else
// not set.
func desiredAlgorithm(d *Desired, in DesiredInput) error {
	a, err := annotation.LBAlgorithmType.Algorithm(in.Service)
	switch {
	case err == nil:
		d.Algorithm = &a
	case isSet(err):
		return err
	case in.Defaults.AlgorithmType != "":
		a, ok := annotation.ParseAlgorithm(in.Defaults.AlgorithmType)
		if !ok {
			return annotation.Usagef("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", "invalid value for %q: %q (expect one of round_robin, least_connections)",
				"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", in.Defaults.AlgorithmType)
		}
		d.Algorithm = &a
	}
	return nil
}

func boolOr(n annotation.Name, svc *corev1.Service, def bool) (bool, error) {
	v, err := n.Bool(svc)
	return pick(v, err, def)
}

func derefOr(p *bool) bool { return p != nil && *p }

// optionalBool is the annotation, else def (nil: not set).
func optionalBool(n annotation.Name, svc *corev1.Service, def *bool) (*bool, error) {
	v, err := n.Bool(svc)
	switch {
	case err == nil:
		return &v, nil
	case isSet(err):
		return nil, err
	}
	if def == nil {
		return nil, nil
	}
	v = *def
	return &v, nil
}

// desiredNetwork: the public interface from disable-public-network (or its default) when set;
// the cluster network's attachment with the private-ipv4 and private-subnet-ip-range wishes.
// Without a network the private settings are ignored, as the official CCM ignores them.
func desiredNetwork(d *Desired, in DesiredInput) error {
	disable, err := optionalBool(annotation.LBDisablePublicNetwork, in.Service, in.Defaults.DisablePublicNetwork)
	if err != nil {
		return err
	}
	if disable != nil {
		public := !*disable
		d.PublicInterface = &public
	}
	if in.Network == nil {
		if disable != nil && *disable {
			return annotation.Usagef(string(annotation.LBDisablePublicNetwork), "%q needs a network: set HCLOUD_NETWORK or remove the annotation", annotation.LBDisablePublicNetwork)
		}
		return nil
	}
	d.Network = &Attachment{ID: in.Network.ID, IPRange: in.Network.IPRange}
	ip, err := annotation.LBPrivateIPv4.IPv4(in.Service)
	if d.Network.IP, err = pick(ip, err, nil); err != nil {
		return err
	}
	subnet, err := annotation.LBPrivateSubnetIPRange.CIDR(in.Service)
	if errors.Is(err, annotation.ErrNotSet) && in.Defaults.PrivateSubnetIPRange != "" {
		_, subnet, err = net.ParseCIDR(in.Defaults.PrivateSubnetIPRange)
		if err != nil {
			return annotation.Usagef("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", "invalid value for %q: %q (expect a CIDR such as 10.0.0.0/24)",
				"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", in.Defaults.PrivateSubnetIPRange)
		}
	}
	if d.Network.Subnet, err = pick(subnet, err, nil); err != nil {
		return err
	}
	if s := d.Network.Subnet; s != nil && in.Network.Subnets != nil && !slices.Contains(in.Network.Subnets, s.String()) {
		return annotation.Usagef(string(annotation.LBPrivateSubnetIPRange), "invalid value for %q: %s is not a subnet of network %s (subnets: %s): add the subnet to the network or pick one of them",
			annotation.LBPrivateSubnetIPRange, s, in.Network.Name, strings.Join(in.Network.Subnets, ", "))
	}
	return nil
}

func desiredRDNS(d *Desired, in DesiredInput) error {
	for _, x := range []struct {
		name annotation.Name
		dst  **string
	}{{annotation.LBPublicIPv4RDNS, &d.IPv4RDNS}, {annotation.LBPublicIPv6RDNS, &d.IPv6RDNS}} {
		if v, ok := x.name.Value(in.Service); ok {
			v = strings.TrimSpace(v)
			*x.dst = &v
		}
	}
	return nil
}

// desiredProtection: the delete-protection annotation, else not set (no variable sets it).
func desiredProtection(d *Desired, in DesiredInput) error {
	var err error
	d.DeleteProtection, err = optionalBool(annotation.LBDeleteProtection, in.Service, nil)
	return err
}

func desiredStatus(d *Desired, in DesiredInput) error {
	var err error
	d.Status, err = NewStatusOptions(in.Service, in.Defaults)
	return err
}

// NewStatusOptions reads the annotations (and defaults) that shape the Service status.
func NewStatusOptions(svc *corev1.Service, defaults config.LoadBalancer) (StatusOptions, error) {
	var o StatusOptions
	var err error
	if o.DisableIPv6, err = boolOr(annotation.LBIPv6Disabled, svc, defaults.DisableIPv6); err != nil {
		return o, err
	}
	if o.DisablePrivateIngress, err = boolOr(annotation.LBDisablePrivateIngress, svc, defaults.DisablePrivateIngress); err != nil {
		return o, err
	}
	if o.ProxyProtocol, err = boolOr(annotation.LBSvcProxyProtocol, svc, derefOr(defaults.UsesProxyProtocol)); err != nil {
		return o, err
	}
	// The hostname goes to the status as it is, as with the official CCM: the API server
	// validates it (the load balancer does not depend on it).
	o.Hostname, o.HostnameSet = annotation.LBHostname.Value(svc)
	return o, nil
}

func desiredTargets(d *Desired, in DesiredInput) error {
	usePrivate, err := boolOr(annotation.LBUsePrivateIP, in.Service, in.Defaults.UsePrivateIP)
	if err != nil {
		return err
	}
	if usePrivate && in.Network == nil {
		return annotation.Usagef(string(annotation.LBUsePrivateIP), "%q needs a network: set HCLOUD_NETWORK or remove the annotation", annotation.LBUsePrivateIP)
	}
	// Deliberately stricter than the official CCM (docs/reference/differences.md): the API
	// refuses a load balancer without a public interface with targets on public IPs
	// (targets_without_use_private_ip, load_balancer_public_interface_disabled); refused here,
	// nothing is half-applied.
	if d.PublicInterface != nil && !*d.PublicInterface && !usePrivate {
		return annotation.Usagef(string(annotation.LBDisablePublicNetwork), "%q needs targets on private IPs: set %q to true", annotation.LBDisablePublicNetwork, annotation.LBUsePrivateIP)
	}
	sel, err := annotation.LBNodeSelector.Selector(in.Service)
	if sel, err = pick(sel, err, labels.Everything()); err != nil {
		return err
	}
	seen := map[int64]bool{}
	for _, n := range in.Nodes {
		if n.ServerID <= 0 || seen[n.ServerID] || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		if _, excluded := n.Labels[LabelExcludeFromLB]; excluded {
			continue
		}
		seen[n.ServerID] = true
		d.Targets = append(d.Targets, Target{ServerID: n.ServerID, UsePrivateIP: usePrivate, Node: n.Name})
	}
	slices.SortFunc(d.Targets, func(a, b Target) int { return cmpInt(a.ServerID, b.ServerID) })
	desiredIPTargets(d, in, usePrivate, sel)
	return nil
}

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
