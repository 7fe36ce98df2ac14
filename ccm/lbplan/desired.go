// Package lbplan is the pure load balancer planner: Desired (what a Service asks for), Actual
// (what Hetzner has), and Compute, which turns the difference into an ordered list of typed
// mutations for the executor. Nothing here touches the network.
//
// Start with NewDesired, NewActual and Compute; Plan.Steps gives each mutation's policy view.
package lbplan

import (
	"errors"
	"fmt"
	"net"
	"slices"
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

// Node is a Kubernetes node already resolved to its Hetzner server by the caller.
type Node struct {
	Name     string
	ServerID int64
	Labels   map[string]string
}

// ClusterNetwork is the cluster's private network (HCLOUD_NETWORK).
type ClusterNetwork struct {
	ID      int64
	Name    string
	IPRange string
}

// Input is everything NewDesired needs. The Service is read, never modified.
type Input struct {
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

// Desired is the load balancer a Service asks for.
type Desired struct {
	Name   string
	Rename bool
	// Labels are set on the load balancer; other labels on it are kept.
	Labels map[string]string
	Type   string
	// TypeFromAnnotation is true when the type annotation is set: only then is an existing load
	// balancer's type changed (removing the annotation does not downgrade, official).
	TypeFromAnnotation bool
	// TypeUnconfigured is true when DefaultType was used.
	TypeUnconfigured bool
	// MaxTargets is the max_targets of Type, set by the caller from the type list; 0 = no limit.
	MaxTargets int
	Location   string
	// LocationFromAnnotation is true when the location annotation is set: a different location
	// on an existing load balancer is then an error.
	LocationFromAnnotation bool
	NetworkZone            string
	NetworkZoneFromAnnot   bool
	Algorithm              hcloud.LoadBalancerAlgorithmType
	PublicInterface        bool
	// Network is the attachment wanted; nil for none.
	Network *Network
	// IPv4RDNS and IPv6RDNS are the wanted PTR records; nil leaves them alone.
	IPv4RDNS, IPv6RDNS *string
	Services           []Service // sorted by ListenPort
	Targets            []Target  // sorted by ServerID
	// ManagedCertificate is set for https with certificate-type managed.
	ManagedCertificate *ManagedCertificate
	// UnsupportedPorts are Service ports with another protocol than TCP (not load balanced).
	UnsupportedPorts []corev1.ServicePort
	Status           StatusOptions
}

// Network is a wanted network attachment.
type Network struct {
	ID      int64
	IPRange string // the network's range, for the policy view
	// IP is the wanted private IP; nil lets the API pick one.
	IP net.IP
	// Subnet is the subnet to attach to; nil lets the API pick one. Used only when attaching.
	Subnet *net.IPNet
}

// Service is one listener. Zero values of the fields documented "optional" mean "not managed":
// they are not compared and the API default applies.
type Service struct {
	Protocol        hcloud.LoadBalancerServiceProtocol
	ListenPort      int
	DestinationPort int
	Proxyprotocol   bool
	HTTP            HTTP // compared for http and https only
	HealthCheck     HealthCheck
}

// HTTP are the HTTP settings of a listener.
type HTTP struct {
	CookieName     string        // optional
	CookieLifetime time.Duration // optional
	TimeoutIdle    time.Duration // optional
	Certificates   []int64       // sorted; compared for https
	RedirectHTTP   bool
	StickySessions bool
}

// HealthCheck is the health check of a listener.
type HealthCheck struct {
	Protocol hcloud.LoadBalancerServiceProtocol
	Port     int
	Interval time.Duration // optional
	Timeout  time.Duration // optional
	Retries  int           // optional
	// HTTP settings, compared for http and https health checks.
	Domain      string   // optional
	Path        string   // optional
	StatusCodes []string // optional
	TLS         bool
}

// Target is a server target.
type Target struct {
	ServerID     int64
	UsePrivateIP bool
	Node         string // node name, for events; not compared
}

// StatusOptions shape the Service status built from the load balancer.
type StatusOptions struct {
	Hostname              string
	DisableIPv6           bool
	DisablePrivateIngress bool
	ProxyProtocol         bool
}

// NewDesired builds the desired load balancer of in.Service from its annotations, the
// environment defaults and the nodes. Errors are annotation errors (*annotation.InvalidError)
// or invalid combinations naming the annotation.
func NewDesired(in Input) (Desired, error) {
	svc := in.Service
	if svc == nil {
		return Desired{}, errors.New("service is nil")
	}
	d := Desired{
		Name:   in.Name,
		Rename: in.Rename,
		Labels: map[string]string{LabelServiceUID: string(svc.UID)},
	}
	steps := []func(*Desired, Input) error{
		desiredType, desiredPlacement, desiredAlgorithm, desiredNetwork, desiredRDNS,
		desiredStatus, desiredServices, desiredManagedCertificate, desiredTargets,
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

func desiredType(d *Desired, in Input) error {
	t, err := annotation.LBType.NonEmptyString(in.Service)
	if err == nil {
		d.Type, d.TypeFromAnnotation = t, true
		return nil
	}
	if isSet(err) {
		return err
	}
	d.Type = in.Defaults.Type
	if d.Type == "" {
		d.Type, d.TypeUnconfigured = DefaultType, true
	}
	return nil
}

func desiredPlacement(d *Desired, in Input) error {
	loc, err := annotation.LBLocation.String(in.Service)
	d.LocationFromAnnotation = err == nil && loc != ""
	if d.Location, err = pick(loc, err, in.Defaults.Location); err != nil {
		return err
	}
	zone, err := annotation.LBNetworkZone.String(in.Service)
	d.NetworkZoneFromAnnot = err == nil && zone != ""
	if d.NetworkZone, err = pick(zone, err, in.Defaults.NetworkZone); err != nil {
		return err
	}
	if d.Location != "" {
		d.NetworkZone, d.NetworkZoneFromAnnot = "", false // location wins (official)
	}
	return nil
}

func desiredAlgorithm(d *Desired, in Input) error {
	def := hcloud.LoadBalancerAlgorithmTypeRoundRobin
	if in.Defaults.AlgorithmType != "" {
		a, ok := annotation.ParseAlgorithm(in.Defaults.AlgorithmType)
		if !ok {
			return fmt.Errorf("invalid value for %q: %q (expect one of round_robin, least_connections)",
				"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", in.Defaults.AlgorithmType)
		}
		def = a
	}
	a, err := annotation.LBAlgorithmType.Algorithm(in.Service)
	d.Algorithm, err = pick(a, err, def)
	return err
}

func boolOr(n annotation.Name, svc *corev1.Service, def bool) (bool, error) {
	v, err := n.Bool(svc)
	return pick(v, err, def)
}

func derefOr(p *bool) bool { return p != nil && *p }

func desiredNetwork(d *Desired, in Input) error {
	disablePublic, err := boolOr(annotation.LBDisablePublicNetwork, in.Service, derefOr(in.Defaults.DisablePublicNetwork))
	if err != nil {
		return err
	}
	d.PublicInterface = !disablePublic
	if in.Network == nil {
		if disablePublic {
			return fmt.Errorf("%q needs a network: set HCLOUD_NETWORK or remove the annotation", annotation.LBDisablePublicNetwork)
		}
		for _, n := range []annotation.Name{annotation.LBPrivateIPv4, annotation.LBPrivateSubnetIPRange} {
			if _, ok := n.Value(in.Service); ok {
				return fmt.Errorf("%q needs a network: set HCLOUD_NETWORK or remove the annotation", n)
			}
		}
		return nil
	}
	d.Network = &Network{ID: in.Network.ID, IPRange: in.Network.IPRange}
	ip, err := annotation.LBPrivateIPv4.IPv4(in.Service)
	if d.Network.IP, err = pick(ip, err, nil); err != nil {
		return err
	}
	subnet, err := annotation.LBPrivateSubnetIPRange.CIDR(in.Service)
	if errors.Is(err, annotation.ErrNotSet) && in.Defaults.PrivateSubnetIPRange != "" {
		_, subnet, err = net.ParseCIDR(in.Defaults.PrivateSubnetIPRange)
		if err != nil {
			return fmt.Errorf("invalid value for %q: %q (expect a CIDR such as 10.0.0.0/24)",
				"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", in.Defaults.PrivateSubnetIPRange)
		}
	}
	d.Network.Subnet, err = pick(subnet, err, nil)
	return err
}

func desiredRDNS(d *Desired, in Input) error {
	for _, x := range []struct {
		name annotation.Name
		dst  **string
	}{{annotation.LBPublicIPv4RDNS, &d.IPv4RDNS}, {annotation.LBPublicIPv6RDNS, &d.IPv6RDNS}} {
		v, err := x.name.NonEmptyString(in.Service)
		switch {
		case err == nil:
			*x.dst = &v
		case isSet(err):
			return err
		}
	}
	return nil
}

func desiredStatus(d *Desired, in Input) error {
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
	h, err := annotation.LBHostname.NonEmptyString(svc)
	o.Hostname, err = pick(h, err, "")
	return o, err
}

func desiredTargets(d *Desired, in Input) error {
	usePrivate, err := boolOr(annotation.LBUsePrivateIP, in.Service, in.Defaults.UsePrivateIP)
	if err != nil {
		return err
	}
	if usePrivate && in.Network == nil {
		return fmt.Errorf("%q needs a network: set HCLOUD_NETWORK or remove the annotation", annotation.LBUsePrivateIP)
	}
	if !d.PublicInterface && !usePrivate {
		return fmt.Errorf("%q needs targets on private IPs: set %q to true", annotation.LBDisablePublicNetwork, annotation.LBUsePrivateIP)
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
