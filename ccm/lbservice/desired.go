// Package lbservice reads a Service: its annotations, the environment's defaults, the checks
// made before any read (CheckService, CheckName) and the load balancer names (AnnotatedName,
// GroupName), into the desired state the planner (ccm/lbplan) plans from (NewDesired) and the
// options of its status (NewStatusOptions). It is pure: it reads only the Service and what
// the caller resolved for it (DesiredInput), never the network, and links neither the policy
// engine, OPA nor client-go (TestPlannersAreLight).
package lbservice

import (
	"cmp"
	"errors"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"

	"k8s.io/apimachinery/pkg/labels"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DesiredInput is everything NewDesired needs. The Service is read, never modified.
type DesiredInput struct {
	Service *corev1.Service
	// Name is the load balancer name (annotation, plugin or default).
	Name string
	// Rename is true when Name came from the name annotation or the naming plugin: an existing
	// load balancer with another name is renamed. A default name never renames (official).
	Rename   bool
	Nodes    []lbplan.Node
	Defaults config.LoadBalancer
	// Network is nil when no network is configured.
	Network *lbplan.ClusterNetwork
	// CertificateIDs are the uploaded certificates of the http-certificates annotation, resolved
	// to IDs by the caller.
	CertificateIDs []int64
	// ManagedCertificateID is the managed certificate carrying the Service's UID label, found
	// by the caller; PendingCertificateID (0) when there is none yet.
	ManagedCertificateID int64
}

// NewDesired builds the desired load balancer of in.Service from its annotations, the
// environment defaults and the nodes. Errors are annotation errors (*annotation.InvalidError)
// or invalid combinations naming the annotation.
func NewDesired(in DesiredInput) (lbplan.Desired, error) {
	svc := in.Service
	if svc == nil {
		return lbplan.Desired{}, errors.New("service is nil")
	}
	d := lbplan.Desired{
		Name:   in.Name,
		Rename: in.Rename,
		Labels: map[string]string{lbplan.LabelServiceUID: string(svc.UID)},
	}
	steps := []func(*lbplan.Desired, DesiredInput) error{
		desiredType, desiredPlacement, desiredAlgorithm, desiredNetwork, desiredRDNS,
		desiredProtection, desiredStatus, desiredServices, desiredManagedCertificate, desiredTargets,
	}
	for _, step := range steps {
		if err := step(&d, in); err != nil {
			return lbplan.Desired{}, err
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
func desiredType(d *lbplan.Desired, in DesiredInput) error {
	d.Type, d.TypeSet = ConfiguredType(in.Service, in.Defaults)
	if !d.TypeSet {
		d.Type, d.TypeUnconfigured = lbplan.DefaultType, true
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
func desiredPlacement(d *lbplan.Desired, in DesiredInput) error {
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
func desiredAlgorithm(d *lbplan.Desired, in DesiredInput) error {
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
func desiredNetwork(d *lbplan.Desired, in DesiredInput) error {
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
	d.Network = &lbplan.Attachment{ID: in.Network.ID, IPRange: in.Network.IPRange}
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

func desiredRDNS(d *lbplan.Desired, in DesiredInput) error {
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
func desiredProtection(d *lbplan.Desired, in DesiredInput) error {
	var err error
	d.DeleteProtection, err = optionalBool(annotation.LBDeleteProtection, in.Service, nil)
	return err
}

func desiredStatus(d *lbplan.Desired, in DesiredInput) error {
	var err error
	d.Status, err = NewStatusOptions(in.Service, in.Defaults)
	return err
}

// NewStatusOptions reads the annotations (and defaults) that shape the Service status.
func NewStatusOptions(svc *corev1.Service, defaults config.LoadBalancer) (lbplan.StatusOptions, error) {
	var o lbplan.StatusOptions
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

func desiredTargets(d *lbplan.Desired, in DesiredInput) error {
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
		if _, excluded := n.Labels[lbplan.LabelExcludeFromLB]; excluded {
			continue
		}
		seen[n.ServerID] = true
		d.Targets = append(d.Targets, lbplan.Target{ServerID: n.ServerID, UsePrivateIP: usePrivate, Node: n.Name})
	}
	slices.SortFunc(d.Targets, func(a, b lbplan.Target) int { return cmp.Compare(a.ServerID, b.ServerID) })
	desiredIPTargets(d, in, usePrivate, sel)
	return nil
}
