// Package instances implements cloudprovider.InstancesV2 for Hetzner Cloud servers and, with
// Robot enabled, Robot dedicated servers (robot.go): it tells
// the upstream node controllers whether a node's server exists, whether it is shut down, and
// its metadata (provider ID, type, region, zone, addresses, labels), exactly as the official
// hcloud-cloud-controller-manager does, plus labels from an optional node_labels plugin.
package instances

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// Label and event names. They are part of the compatibility surface; do not rename them.
const (
	// LabelProvidedBy is the node label the official CCM sets to "cloud" for cloud servers.
	LabelProvidedBy = "instance.hetzner.cloud/provided-by"
	// EventPluginFailed is the reason of the Warning event on a Node whose label plugin failed.
	EventPluginFailed = "PluginFailed"
)

// NodeLabeler computes extra labels for a node, for example a wasm node_labels plugin. Its
// output is used as it is: the plugin host validates it (plugins.ValidateLabels) and counts
// failures (hcloud_ccm_plugin_failures_total).
type NodeLabeler interface {
	NodeLabels(ctx context.Context, in plugins.NodeInput) (map[string]string, error)
}

// Instances implements [cloudprovider.InstancesV2] for Hetzner Cloud servers.
type Instances struct {
	cache     *servercache.Cache
	cfg       config.Instances
	networkID int64
	recorder  record.EventRecorder
	labeler   NodeLabeler
	// robot serves Robot nodes; nil without Robot API access (Options.Robot).
	robot              *robot.Client
	forwardInternalIPs bool
}

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// Options configure [New]. Cache is required.
type Options struct {
	// Cache reads the cloud servers.
	Cache *servercache.Cache
	// Config is the address family and network settings of the node addresses.
	Config config.Instances
	// NetworkID is the ID of HCLOUD_NETWORK (0 for none): the node's IP in it becomes its
	// InternalIP.
	NetworkID int64
	// Recorder receives Warning events; nil drops them.
	Recorder record.EventRecorder
	// Labeler is optional (nil for none); its labels are added to every node's metadata.
	Labeler NodeLabeler
	// Robot, if not nil, makes the instances serve Robot nodes (hrobot:// and hcloud://bm-
	// provider IDs, and names of Robot servers) through the Robot API (ROBOT_ENABLED with
	// credentials).
	Robot *robot.Client
	// ForwardInternalIPs is ROBOT_FORWARD_INTERNAL_IPS: Robot nodes keep the InternalIPs
	// they report.
	ForwardInternalIPs bool
}

// New returns InstancesV2 reading servers through o.Cache.
//
// # Errors
//
// A nil Cache is an error.
func New(o Options) (*Instances, error) {
	if o.Cache == nil {
		return nil, errors.New("instances.New: Options.Cache is required: pass the server cache of servercache.New")
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	return &Instances{
		cache: o.Cache, cfg: o.Config, networkID: o.NetworkID, recorder: o.Recorder, labeler: o.Labeler,
		robot: o.Robot, forwardInternalIPs: o.ForwardInternalIPs,
	}, nil
}

// InstanceExists returns true if the server of the node exists.
//
// It looks the server up by node.spec.providerID (hcloud://<id>, or with Robot hrobot://<n>
// and the legacy hcloud://bm-<n>) or, when that is empty, by the node's name among cloud
// servers and, with Robot, Robot servers. An unknown provider ID, a Robot one without Robot
// access, and a name found in both APIs are errors, so the node is never deleted by mistake.
func (i *Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	compatmetrics.Operation(compatmetrics.OpInstanceExists)
	const op = "instances.InstanceExists"
	s, err := i.lookup(servercache.Live(ctx), node) // asked for NotReady nodes: see servercache
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return s.found(), nil
}

// InstanceShutdown returns true if the server of the node is off: status "off" for a cloud
// server, reset operating status "shut off" for a Robot server (robot.ResetStatusMaxAge).
//
// # Errors
//
// A missing server wraps [cloudprovider.InstanceNotFound].
func (i *Instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	compatmetrics.Operation(compatmetrics.OpInstanceShutdown)
	const op = "instances.InstanceShutdown"
	s, err := i.lookup(servercache.Live(ctx), node)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if !s.found() {
		return false, fmt.Errorf("%s: no server for node %q: %w", op, node.Name, cloudprovider.InstanceNotFound)
	}
	if s.robot != nil {
		off, err := i.robotShutdown(ctx, s.robot)
		if err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return off, nil
	}
	return s.cloud.Status == hcloud.ServerStatusOff, nil
}

// InstanceMetadata returns the metadata of the node's server.
//
// The server is found by node.spec.providerID first, by node name otherwise. ProviderID is
// hcloud://<id>, InstanceType the server type name, Region the location name, Zone the legacy
// datacenter name of the location (when the zone label is enabled). Addresses, in order: the
// server name as Hostname; the public IPv4 (address family ipv4 or dualstack) and the first
// address of the public IPv6 /64 (ipv6 or dualstack) as ExternalIP; the server's IP in the
// configured network as InternalIP. AdditionalLabels hold instance.hetzner.cloud/provided-by=cloud
// and the labels of the NodeLabeler, if any (built-in labels win). A failing NodeLabeler does
// not fail the call: its labels are left out, and a Warning event PluginFailed is recorded on
// the node. A Robot server gets the official CCM's Robot metadata (robotMetadata), with
// provided-by=robot, and the NodeLabeler's labels too, for the input RobotNodeInput builds.
//
// # Errors
//
// A missing server wraps [cloudprovider.InstanceNotFound].
func (i *Instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	compatmetrics.Operation(compatmetrics.OpInstanceMetadata)
	const op = "instances.InstanceMetadata"
	found, err := i.lookup(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if !found.found() {
		return nil, fmt.Errorf("%s: no server for node %q: %w", op, node.Name, cloudprovider.InstanceNotFound)
	}
	if found.robot != nil {
		md := i.robotMetadata(node, found.robot)
		maps.Copy(md.AdditionalLabels, i.pluginLabels(ctx, node, func() plugins.NodeInput { return RobotNodeInput(node, found.robot) }))
		md.AdditionalLabels[LabelProvidedBy] = "robot"
		return md, nil
	}
	s := found.cloud

	md := &cloudprovider.InstanceMetadata{
		ProviderID:       providerid.FromServerID(s.ID),
		NodeAddresses:    i.addresses(s),
		AdditionalLabels: map[string]string{},
	}
	if s.ServerType != nil {
		md.InstanceType = s.ServerType.Name
	}
	if s.Location != nil {
		md.Region = s.Location.Name
		if i.cfg.ZoneLabelEnabled {
			md.Zone = ZoneFromLocation(s.Location.Name)
		}
	}
	maps.Copy(md.AdditionalLabels, i.pluginLabels(ctx, node, func() plugins.NodeInput { return NodeInput(node, s) }))
	md.AdditionalLabels[LabelProvidedBy] = "cloud"
	return md, nil
}

// server is the result of lookup: a cloud server, a Robot server, or neither.
type server struct {
	cloud *hcloud.Server
	robot *robot.Server
}

func (s server) found() bool { return s.cloud != nil || s.robot != nil }

// lookup finds the node's server: by provider ID if set, else by name among cloud servers
// and (with Robot) Robot servers; neither if there is none. A name found in both APIs is an
// error with an InstanceLookupFailed event, as in the official CCM.
func (i *Instances) lookup(ctx context.Context, node *corev1.Node) (server, error) {
	if node == nil {
		return server{}, fmt.Errorf("nil node")
	}
	if providerid.IsRobot(node.Spec.ProviderID) {
		s, err := i.lookupRobot(ctx, node)
		return server{robot: s}, err
	}
	if node.Spec.ProviderID != "" {
		id, err := providerid.ToServerID(node.Spec.ProviderID)
		if err != nil {
			return server{}, fmt.Errorf("node %q: %w", node.Name, err)
		}
		s, err := i.cache.ByID(ctx, id)
		return server{cloud: s}, err
	}
	cloud, err := i.cache.ByName(ctx, node.Name)
	if err != nil {
		return server{}, err
	}
	rs, err := i.robotByName(ctx, node, cloud == nil)
	if err != nil {
		return server{}, err
	}
	if cloud != nil && rs != nil {
		i.recorder.Eventf(node, corev1.EventTypeWarning, EventInstanceLookupFailed,
			"Node %s could not be uniquely associated with a Cloud or Robot server, as a server with this name exists in both APIs", node.Name)
		return server{}, fmt.Errorf("node %q: found both a cloud server (%d) and a robot server (%d) with this name", node.Name, cloud.ID, rs.Number)
	}
	return server{cloud: cloud, robot: rs}, nil
}

// addresses returns the node addresses of s. It does not modify s (it is shared by the cache).
func (i *Instances) addresses(s *hcloud.Server) []corev1.NodeAddress {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: s.Name}}
	family := i.cfg.AddressFamily
	ipv4 := family == config.AddressFamilyIPv4 || family == config.AddressFamilyDualStack
	ipv6 := family == config.AddressFamilyIPv6 || family == config.AddressFamilyDualStack
	if ipv4 && !s.PublicNet.IPv4.IsUnspecified() {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: s.PublicNet.IPv4.IP.String()})
	}
	if ipv6 && !s.PublicNet.IPv6.IsUnspecified() {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: IPv6HostAddress(s.PublicNet.IPv6.IP).String()})
	}
	if i.networkID > 0 {
		for _, pn := range s.PrivateNet {
			if pn.Network != nil && pn.Network.ID == i.networkID && pn.IP != nil {
				addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: pn.IP.String()})
			}
		}
	}
	return addrs
}

// IPv6HostAddress returns the address the official CCM reports for a server's IPv6 network:
// the network address with the last bit set (2001:db8:1234::/64 → 2001:db8:1234::1). It
// returns a new IP and leaves network untouched.
func IPv6HostAddress(network net.IP) net.IP {
	ip := slices.Clone(network.To16())
	if len(ip) == 0 {
		return nil
	}
	ip[len(ip)-1] |= 0x01
	return ip
}

// legacyZones maps locations to the datacenter names the official CCM uses as zone label
// (the API dropped datacenters on 2026-07-01). Changing a value changes node labels.
var legacyZones = map[string]string{
	"nbg1": "nbg1-dc3",
	"hel1": "hel1-dc2",
	"fsn1": "fsn1-dc14",
	"ash":  "ash-dc1",
	"hil":  "hil-dc1",
	"sin":  "sin-dc1",
}

// ZoneFromLocation returns the zone label of a location: its legacy datacenter name, or the
// location name itself for locations without one.
func ZoneFromLocation(location string) string {
	if z, ok := legacyZones[location]; ok {
		return z
	}
	return location
}

// pluginLabels asks the labeler for labels, with the input input builds (only called when
// there is a labeler). On an error (the host refused invalid output, or the call failed) it
// records a Warning event and returns nil.
func (i *Instances) pluginLabels(ctx context.Context, node *corev1.Node, input func() plugins.NodeInput) map[string]string {
	if i.labeler == nil {
		return nil
	}
	labels, err := i.labeler.NodeLabels(ctx, input())
	if err != nil {
		msg := fmt.Sprintf("node_labels plugin failed, the node gets the built-in labels only: %v", err)
		klog.InfoS("plugin failed", "hook", plugins.HookNodeLabels, "node", node.Name, "err", err)
		i.recorder.Event(node, corev1.EventTypeWarning, EventPluginFailed, msg)
		return nil
	}
	return labels
}

// NodeInput builds the node_labels hook input for node and its server s: the node's name and
// labels, and the server's ID, name, type and its hardware (server_type: cores, memory, disk,
// architecture, CPU type), location, network zone, datacenter (the node's
// zone, ZoneFromLocation), labels, public IPs (the
// IPv6 as the host address the node reports) and private network IPs. Maps and slices in the
// result are never nil and never shared with node or s, which are left untouched.
//
// InstanceMetadata and ccm/nodelabels both build their input here, so a plugin sees the same
// input at node initialisation and afterwards.
func NodeInput(node *corev1.Node, s *hcloud.Server) plugins.NodeInput {
	in := plugins.NodeInput{
		NodeName:   node.Name,
		NodeLabels: maps.Clone(node.Labels),
		Server: plugins.Server{
			ID:          s.ID,
			Name:        s.Name,
			Labels:      maps.Clone(s.Labels),
			PrivateNets: []plugins.PrivateNet{},
		},
	}
	if in.NodeLabels == nil {
		in.NodeLabels = map[string]string{}
	}
	if in.Server.Labels == nil {
		in.Server.Labels = map[string]string{}
	}
	if s.ServerType != nil {
		in.Server.Type = s.ServerType.Name
		in.Server.ServerType = serverTypeFacts(s.ServerType)
	}
	if s.Location != nil {
		in.Server.Location = s.Location.Name
		in.Server.NetworkZone = string(s.Location.NetworkZone)
		in.Server.Datacenter = ZoneFromLocation(s.Location.Name)
	}
	if !s.PublicNet.IPv4.IsUnspecified() {
		in.Server.PublicIPv4 = s.PublicNet.IPv4.IP.String()
	}
	if !s.PublicNet.IPv6.IsUnspecified() {
		in.Server.PublicIPv6 = IPv6HostAddress(s.PublicNet.IPv6.IP).String()
	}
	for _, pn := range s.PrivateNet {
		if pn.Network == nil || pn.IP == nil {
			continue
		}
		in.Server.PrivateNets = append(in.Server.PrivateNets, plugins.PrivateNet{NetworkID: pn.Network.ID, IP: pn.IP.String()})
	}
	return in
}

// serverTypeFacts returns the hardware facts of t for the node_labels input. The memory is
// rounded to the MB, so that float32's noise (0.5 is exact, 3.7 is not) does not reach the
// plugin's JSON.
func serverTypeFacts(t *hcloud.ServerType) *plugins.ServerType {
	return &plugins.ServerType{
		Name:         t.Name,
		Cores:        t.Cores,
		MemoryGB:     math.Round(float64(t.Memory)*1000) / 1000,
		DiskGB:       t.Disk,
		Architecture: string(t.Architecture),
		CPUType:      string(t.CPUType),
	}
}
