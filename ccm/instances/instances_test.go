package instances_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/instances"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// env is an emulator with one network and a server cache over it.
type env struct {
	emu       *hcloudemu.Emulator
	cache     *servercache.Cache
	networkID int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	networkID, err := emu.AddNetwork(hcloudemu.NetworkSpec{
		Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/24", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := servercache.New(servercache.Options{Servers: conn.Servers(), Config: config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{emu: emu, cache: cache, networkID: networkID}
}

// newInstances returns instances.New(o) and fails the test on an error.
func newInstances(t *testing.T, o instances.Options) *instances.Instances {
	t.Helper()
	i, err := instances.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestNew_errors(t *testing.T) {
	tests := []struct {
		name    string
		o       instances.Options
		wantErr string
	}{
		{"no cache", instances.Options{}, "instances.New: Options.Cache is required: pass the server cache of servercache.New"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := instances.New(tc.o); err == nil || err.Error() != tc.wantErr {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func (e *env) addServer(t *testing.T, spec hcloudemu.ServerSpec) int64 {
	t.Helper()
	id, err := e.emu.AddServer(spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newNode builds a Node named name, tweaked by the options.
func newNode(name string, tweaks ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "worker"}}}
	for _, tweak := range tweaks {
		tweak(n)
	}
	return n
}

func withProviderID(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

func instancesCfg(family config.AddressFamily, zone bool) config.Instances {
	return config.Instances{AddressFamily: family, ZoneLabelEnabled: zone}
}

func TestInstances_InstanceMetadata(t *testing.T) {
	e := newEnv(t)
	id := e.addServer(t, hcloudemu.ServerSpec{
		Name: "node-1", Type: "cx22", Location: "fsn1",
		PublicIPv4: "203.0.113.7", PublicIPv6: "2001:db8:1234::/64",
		Networks: []hcloudemu.ServerNetwork{{NetworkID: e.networkID, IP: "10.0.0.5"}},
	})
	noV4 := e.addServer(t, hcloudemu.ServerSpec{Name: "node-v6", Location: "ash", PublicIPv4: "none", PublicIPv6: "2001:db8:5::/64"})
	pid := fmt.Sprintf("hcloud://%d", id)
	hostname := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}
	v4 := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
	v6 := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2001:db8:1234::1"}
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}
	labels := map[string]string{"instance.hetzner.cloud/provided-by": "cloud"}

	tests := []struct {
		name      string
		cfg       config.Instances
		networkID int64
		node      *corev1.Node
		want      *cloudprovider.InstanceMetadata
	}{
		{
			name: "ipv4 reports the public IPv4 as ExternalIP",
			cfg:  instancesCfg(config.AddressFamilyIPv4, true),
			node: newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v4}, AdditionalLabels: labels},
		},
		{
			name: "ipv6 reports the first address of the /64 as ExternalIP",
			cfg:  instancesCfg(config.AddressFamilyIPv6, true),
			node: newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v6}, AdditionalLabels: labels},
		},
		{
			name: "dualstack reports IPv4 then IPv6",
			cfg:  instancesCfg(config.AddressFamilyDualStack, true),
			node: newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v4, v6}, AdditionalLabels: labels},
		},
		{
			name:      "with a network the IP in that network is the InternalIP",
			cfg:       instancesCfg(config.AddressFamilyIPv4, true),
			networkID: e.networkID,
			node:      newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v4, internal}, AdditionalLabels: labels},
		},
		{
			name:      "another network gives no InternalIP",
			cfg:       instancesCfg(config.AddressFamilyIPv4, true),
			networkID: e.networkID + 1000,
			node:      newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v4}, AdditionalLabels: labels},
		},
		{
			name: "a node without provider ID is found by name",
			cfg:  instancesCfg(config.AddressFamilyIPv4, true),
			node: newNode("node-1"),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1", Zone: "fsn1-dc14",
				NodeAddresses: []corev1.NodeAddress{hostname, v4}, AdditionalLabels: labels},
		},
		{
			name: "a disabled zone label leaves Zone empty",
			cfg:  instancesCfg(config.AddressFamilyIPv4, false),
			node: newNode("node-1", withProviderID(pid)),
			want: &cloudprovider.InstanceMetadata{ProviderID: pid, InstanceType: "cx22", Region: "fsn1",
				NodeAddresses: []corev1.NodeAddress{hostname, v4}, AdditionalLabels: labels},
		},
		{
			name: "a server without IPv4 has no IPv4 ExternalIP, even in dualstack",
			cfg:  instancesCfg(config.AddressFamilyDualStack, true),
			node: newNode("node-v6"),
			want: &cloudprovider.InstanceMetadata{ProviderID: fmt.Sprintf("hcloud://%d", noV4), InstanceType: "cx22", Region: "ash", Zone: "ash-dc1",
				NodeAddresses:    []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-v6"}, {Type: corev1.NodeExternalIP, Address: "2001:db8:5::1"}},
				AdditionalLabels: labels},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := newInstances(t, instances.Options{Cache: e.cache, Config: tc.cfg, NetworkID: tc.networkID})
			got, err := i.InstanceMetadata(t.Context(), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InstanceMetadata() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("the cached server is not modified by the IPv6 address", func(t *testing.T) {
		s, err := e.cache.ByID(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.PublicNet.IPv6.IP.String(); got != "2001:db8:1234::" {
			t.Errorf("cached IPv6 = %s, want the network address 2001:db8:1234::", got)
		}
	})
}

func TestInstances_errors(t *testing.T) {
	e := newEnv(t)
	i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(config.AddressFamilyIPv4, true)})
	tests := []struct {
		name         string
		node         *corev1.Node
		wantErr      string
		wantNotFound bool
	}{
		{name: "a missing server is InstanceNotFound", node: newNode("gone", withProviderID("hcloud://4242")),
			wantErr: `no server for node "gone": instance not found`, wantNotFound: true},
		{name: "a missing server by name is InstanceNotFound", node: newNode("gone"),
			wantErr: "instance not found", wantNotFound: true},
		{name: "a Robot provider ID is an error", node: newNode("robot", withProviderID("hrobot://1")),
			wantErr: `node "robot" has provider ID "hrobot://1": no robot client configured`},
		{name: "a foreign provider ID is an error", node: newNode("aws", withProviderID("aws:///i-1")),
			wantErr: "unknown prefix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := i.InstanceMetadata(t.Context(), tc.node)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "instances.InstanceMetadata: ") {
				t.Fatalf("InstanceMetadata() error = %v, want %q", err, tc.wantErr)
			}
			if errors.Is(err, cloudprovider.InstanceNotFound) != tc.wantNotFound {
				t.Errorf("errors.Is(err, InstanceNotFound) = %v, want %v", !tc.wantNotFound, tc.wantNotFound)
			}
		})
	}
}

func TestInstances_InstanceExistsAndShutdown(t *testing.T) {
	e := newEnv(t)
	running := e.addServer(t, hcloudemu.ServerSpec{Name: "running"})
	off := e.addServer(t, hcloudemu.ServerSpec{Name: "off", Status: "off"})
	i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(config.AddressFamilyIPv4, true)})

	tests := []struct {
		name                     string
		node                     *corev1.Node
		wantExists, wantShutdown bool
		wantShutdownErr          error
	}{
		{name: "a running server exists and is not shut down", node: newNode("x", withProviderID(fmt.Sprintf("hcloud://%d", running))), wantExists: true},
		{name: "a server that is off exists and is shut down", node: newNode("off"), wantExists: true, wantShutdown: true},
		{name: "a missing server does not exist", node: newNode("missing"), wantShutdownErr: cloudprovider.InstanceNotFound},
	}
	_ = off
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exists, err := i.InstanceExists(t.Context(), tc.node)
			if err != nil || exists != tc.wantExists {
				t.Errorf("InstanceExists() = %v, %v, want %v", exists, err, tc.wantExists)
			}
			shutdown, err := i.InstanceShutdown(t.Context(), tc.node)
			if !errors.Is(err, tc.wantShutdownErr) || shutdown != tc.wantShutdown {
				t.Errorf("InstanceShutdown() = %v, %v, want %v, %v", shutdown, err, tc.wantShutdown, tc.wantShutdownErr)
			}
		})
	}

	t.Run("a Robot provider ID is an error, not a missing instance", func(t *testing.T) {
		_, err := i.InstanceExists(t.Context(), newNode("r", withProviderID("hcloud://bm-7")))
		if err == nil || !strings.HasPrefix(err.Error(), "instances.InstanceExists: ") {
			t.Errorf("InstanceExists() error = %v", err)
		}
	})
}

// labeler is a NodeLabeler returning fixed labels or an error, and recording its input.
type labeler struct {
	mu     sync.Mutex
	labels map[string]string
	err    error
	got    []plugins.NodeInput
}

var _ instances.NodeLabeler = (*labeler)(nil)

func (l *labeler) NodeLabels(_ context.Context, in plugins.NodeInput) (map[string]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, in)
	return l.labels, l.err
}

func TestInstances_InstanceMetadataPlugin(t *testing.T) {
	e := newEnv(t)
	id := e.addServer(t, hcloudemu.ServerSpec{
		Name: "node-1", Location: "nbg1", PublicIPv4: "203.0.113.9", PublicIPv6: "2001:db8:9::/64",
		Labels:   map[string]string{"pool": "a"},
		Networks: []hcloudemu.ServerNetwork{{NetworkID: e.networkID, IP: "10.0.0.9"}},
	})

	tests := []struct {
		name       string
		labeler    *labeler
		wantLabels map[string]string
		wantEvent  string
	}{
		{
			name:       "plugin labels are added and the built-in label wins",
			labeler:    &labeler{labels: map[string]string{"pool": "a", "instance.hetzner.cloud/provided-by": "plugin"}},
			wantLabels: map[string]string{"pool": "a", "instance.hetzner.cloud/provided-by": "cloud"},
		},
		{
			name:       "a plugin error leaves the plugin labels out and raises a PluginFailed event",
			labeler:    &labeler{err: errors.New("trap: unreachable")},
			wantLabels: map[string]string{"instance.hetzner.cloud/provided-by": "cloud"},
			wantEvent:  "Warning PluginFailed node_labels plugin failed, the node gets the built-in labels only: trap: unreachable",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(config.AddressFamilyIPv4, true), NetworkID: e.networkID, Recorder: rec, Labeler: tc.labeler})
			md, err := i.InstanceMetadata(t.Context(), newNode("node-1"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, md.AdditionalLabels); diff != "" {
				t.Errorf("AdditionalLabels mismatch (-want +got):\n%s", diff)
			}
			if md.ProviderID != fmt.Sprintf("hcloud://%d", id) {
				t.Errorf("ProviderID = %q", md.ProviderID)
			}
			var event string
			select {
			case event = <-rec.Events:
			default:
			}
			if tc.wantEvent == "" && event != "" || !strings.HasPrefix(event, tc.wantEvent) {
				t.Errorf("event = %q, want %q", event, tc.wantEvent)
			}
		})
	}

	t.Run("the plugin sees the node and its server", func(t *testing.T) {
		l := &labeler{}
		i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(config.AddressFamilyIPv4, true), NetworkID: e.networkID, Labeler: l})
		if _, err := i.InstanceMetadata(t.Context(), newNode("node-1")); err != nil {
			t.Fatal(err)
		}
		want := []plugins.NodeInput{{
			NodeName:   "node-1",
			NodeLabels: map[string]string{"role": "worker"},
			Server: plugins.Server{
				ID: id, Name: "node-1", Type: "cx22", Location: "nbg1", NetworkZone: "eu-central", Datacenter: "nbg1-dc3",
				Labels: map[string]string{"pool": "a"}, PublicIPv4: "203.0.113.9", PublicIPv6: "2001:db8:9::1",
				PrivateNets: []plugins.PrivateNet{{NetworkID: e.networkID, IP: "10.0.0.9"}},
				ServerType:  &plugins.ServerType{Name: "cx22", Cores: 2, MemoryGB: 4, DiskGB: 40, Architecture: "x86", CPUType: "shared"},
			},
		}}
		if diff := cmp.Diff(want, l.got); diff != "" {
			t.Errorf("plugin input mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestInstances_requestBudget: metadata and existence for N nodes cost one paginated list of
// ceil(N/50) pages and nothing else (the official CCM measured 81 requests for 500 nodes).
func TestInstances_requestBudget(t *testing.T) {
	for _, nodes := range []int{200, 500} {
		t.Run(fmt.Sprintf("%d nodes cost %d list pages", nodes, (nodes+49)/50), func(t *testing.T) {
			e := newEnv(t)
			ids := make([]int64, nodes)
			for n := range nodes {
				ids[n] = e.addServer(t, hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", n)})
			}
			e.emu.ResetRequests()
			i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(config.AddressFamilyDualStack, true), NetworkID: e.networkID})

			var wg sync.WaitGroup
			for n := range nodes {
				wg.Go(func() {
					node := newNode(fmt.Sprintf("node-%d", n))
					if n%2 == 0 {
						node.Spec.ProviderID = fmt.Sprintf("hcloud://%d", ids[n])
					}
					if _, err := i.InstanceMetadata(t.Context(), node); err != nil {
						t.Error(err)
					}
					if ok, err := i.InstanceExists(t.Context(), node); err != nil || !ok {
						t.Errorf("InstanceExists(%s) = %v, %v", node.Name, ok, err)
					}
				})
			}
			wg.Wait()
			if diff := cmp.Diff(map[string]int{"GET /v1/servers": (nodes + 49) / 50}, e.emu.Counts()); diff != "" {
				t.Errorf("requests for %d nodes mismatch (-want +got):\n%s", nodes, diff)
			}
		})
	}
}

func TestZoneFromLocation(t *testing.T) {
	tests := map[string]string{"nbg1": "nbg1-dc3", "hel1": "hel1-dc2", "fsn1": "fsn1-dc14", "ash": "ash-dc1", "hil": "hil-dc1", "sin": "sin-dc1", "new1": "new1"}
	for loc, want := range tests {
		if got := instances.ZoneFromLocation(loc); got != want {
			t.Errorf("ZoneFromLocation(%q) = %q, want %q", loc, got, want)
		}
	}
}

func TestNodeInput(t *testing.T) {
	tests := []struct {
		name   string
		node   *corev1.Node
		server *hcloud.Server
		want   plugins.NodeInput
	}{
		{
			name:   "a bare server gives empty, non-nil maps and slices",
			node:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
			server: &hcloud.Server{ID: 7, Name: "n1"},
			want: plugins.NodeInput{
				NodeName: "n1", NodeLabels: map[string]string{},
				Server: plugins.Server{ID: 7, Name: "n1", Labels: map[string]string{}, PrivateNets: []plugins.PrivateNet{}},
			},
		},
		{
			name: "a full server fills every field and skips networks without an IP",
			node: newNode("n2"),
			server: &hcloud.Server{
				ID: 8, Name: "n2", Labels: map[string]string{"pool": "b"},
				ServerType: &hcloud.ServerType{Name: "cax21", Cores: 4, Memory: 7.7, Disk: 80, Architecture: hcloud.ArchitectureARM, CPUType: hcloud.CPUTypeShared},
				Location:   &hcloud.Location{Name: "hel1", NetworkZone: hcloud.NetworkZoneEUCentral},
				PublicNet: hcloud.ServerPublicNet{
					IPv4: hcloud.ServerPublicNetIPv4{IP: net.ParseIP("203.0.113.8")},
					IPv6: hcloud.ServerPublicNetIPv6{IP: net.ParseIP("2001:db8:8::")},
				},
				PrivateNet: []hcloud.ServerPrivateNet{
					{Network: &hcloud.Network{ID: 3}, IP: net.ParseIP("10.0.0.8")},
					{Network: &hcloud.Network{ID: 4}},
					{IP: net.ParseIP("10.1.0.8")},
				},
			},
			want: plugins.NodeInput{
				NodeName: "n2", NodeLabels: map[string]string{"role": "worker"},
				Server: plugins.Server{
					ID: 8, Name: "n2", Type: "cax21", Location: "hel1", NetworkZone: "eu-central", Datacenter: "hel1-dc2",
					Labels: map[string]string{"pool": "b"}, PublicIPv4: "203.0.113.8", PublicIPv6: "2001:db8:8::1",
					PrivateNets: []plugins.PrivateNet{{NetworkID: 3, IP: "10.0.0.8"}},
					// float32(7.7) is 7.69999980926513671875: rounded to the MB for the plugin.
					ServerType: &plugins.ServerType{Name: "cax21", Cores: 4, MemoryGB: 7.7, DiskGB: 80, Architecture: "arm", CPUType: "shared"},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodeBefore, serverLabelsBefore := tc.node.DeepCopy(), maps.Clone(tc.server.Labels)
			got := instances.NodeInput(tc.node, tc.server)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NodeInput mismatch (-want +got):\n%s", diff)
			}
			got.NodeLabels["added"] = "x"
			got.Server.Labels["added"] = "x"
			if diff := cmp.Diff(nodeBefore, tc.node); diff != "" {
				t.Errorf("the node was modified (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(serverLabelsBefore, tc.server.Labels); diff != "" {
				t.Errorf("the server labels were modified (-before +after):\n%s", diff)
			}
		})
	}
}
