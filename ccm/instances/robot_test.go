package instances_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/instances"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

var robotSeed = robotemu.Seed{Servers: []robotemu.Server{
	{Number: 321, Name: "bm-1", IP: "203.0.113.5", IPv6Net: "2001:db8:1::", Product: "Server Auction", DC: "FSN1-DC16"},
	{Number: 322, Name: "bm-off", IP: "203.0.113.6", Product: "AX41-NVMe", DC: "HEL1-DC5", OperatingStatus: "shut off"},
	{Number: 323, Name: "both", IP: "203.0.113.7", DC: "NBG1-DC3"},
}}

// newRobotInstances returns InstancesV2 over a cloud emulator (with a server named "both")
// and a Robot emulator holding robotSeed.
func newRobotInstances(t *testing.T, family config.AddressFamily, forward bool, rec record.EventRecorder) (*instances.Instances, *robotemu.Emulator) {
	t.Helper()
	return newRobotInstancesWith(t, family, forward, rec, nil)
}

// newRobotInstancesWith is newRobotInstances with a node_labels plugin (nil: none).
func newRobotInstancesWith(t *testing.T, family config.AddressFamily, forward bool, rec record.EventRecorder, l instances.NodeLabeler) (*instances.Instances, *robotemu.Emulator) {
	t.Helper()
	e := newEnv(t)
	e.addServer(t, hcloudemu.ServerSpec{Name: "both"})
	emu, endpoint := robotemu.NewTestServer(t, robotSeed)
	cfg := config.Robot{Enabled: true, User: emu.User(), Password: emu.Password(), CacheTimeout: time.Minute, Endpoint: endpoint, ForwardInternalIPs: forward}
	rc, err := robot.New(robot.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	i := newInstances(t, instances.Options{Cache: e.cache, Config: instancesCfg(family, true), Recorder: rec, Robot: rc, ForwardInternalIPs: cfg.ForwardInternalIPs, Labeler: l})
	return i, emu
}

func withInternalIPs(ips ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
}

func TestInstances_InstanceMetadata_robot(t *testing.T) {
	tests := []struct {
		name       string
		family     config.AddressFamily
		forward    bool
		node       *corev1.Node
		want       *cloudprovider.InstanceMetadata
		wantEvents []string
	}{
		{
			name: "a Robot server found by name gets the official CCM's metadata", family: config.AddressFamilyIPv4,
			node: newNode("bm-1"),
			want: &cloudprovider.InstanceMetadata{
				ProviderID: "hrobot://321", InstanceType: "Server-Auction", Zone: "fsn1-dc16", Region: "fsn1",
				NodeAddresses:    []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "bm-1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.5"}},
				AdditionalLabels: map[string]string{"instance.hetzner.cloud/provided-by": "robot"},
			},
		},
		{
			name: "dualstack lists the IPv6 host address before the IPv4, and forwards the kubelet's InternalIPs", family: config.AddressFamilyDualStack, forward: true,
			node: newNode("bm-1", withProviderID("hrobot://321"), withInternalIPs("10.1.0.5", "fd00::5")),
			want: &cloudprovider.InstanceMetadata{
				ProviderID: "hrobot://321", InstanceType: "Server-Auction", Zone: "fsn1-dc16", Region: "fsn1",
				NodeAddresses: []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: "bm-1"}, {Type: corev1.NodeExternalIP, Address: "2001:db8:1::1"},
					{Type: corev1.NodeExternalIP, Address: "203.0.113.5"},
					{Type: corev1.NodeInternalIP, Address: "10.1.0.5"}, {Type: corev1.NodeInternalIP, Address: "fd00::5"},
				},
				AdditionalLabels: map[string]string{"instance.hetzner.cloud/provided-by": "robot"},
			},
		},
		{
			name: "forwarded InternalIPs of the wrong family or equal to an ExternalIP are dropped with events", family: config.AddressFamilyIPv4, forward: true,
			node: newNode("bm-off", withProviderID("hcloud://bm-322"), withInternalIPs("fd00::6", "203.0.113.6", "10.1.0.6")),
			want: &cloudprovider.InstanceMetadata{
				ProviderID: "hrobot://322", InstanceType: "AX41-NVMe", Zone: "hel1-dc5", Region: "hel1",
				NodeAddresses: []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: "bm-off"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.6"},
					{Type: corev1.NodeInternalIP, Address: "10.1.0.6"},
				},
				AdditionalLabels: map[string]string{"instance.hetzner.cloud/provided-by": "robot"},
			},
			wantEvents: []string{"Warning MisconfiguredInternalIP Configured InternalIP fd00::6 is IPv6", "Warning MisconfiguredInternalIP Configured InternalIP 203.0.113.6 is also an ExternalIP"},
		},
		{
			name: "without ROBOT_FORWARD_INTERNAL_IPS the kubelet's InternalIPs are not kept", family: config.AddressFamilyIPv4,
			node: newNode("bm-1", withProviderID("hrobot://321"), withInternalIPs("10.1.0.5")),
			want: &cloudprovider.InstanceMetadata{
				ProviderID: "hrobot://321", InstanceType: "Server-Auction", Zone: "fsn1-dc16", Region: "fsn1",
				NodeAddresses:    []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "bm-1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.5"}},
				AdditionalLabels: map[string]string{"instance.hetzner.cloud/provided-by": "robot"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			i, _ := newRobotInstances(t, tc.family, tc.forward, rec)
			got, err := i.InstanceMetadata(t.Context(), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InstanceMetadata() mismatch (-want +got):\n%s", diff)
			}
			checkEvents(t, rec, tc.wantEvents)
		})
	}
}

// TestInstances_InstanceMetadata_robotPlugin: dedicated nodes reach the node_labels plugin,
// with what Robot gives; the plugin cannot replace provided-by, and a failing plugin leaves
// the built-in labels with a Warning event.
func TestInstances_InstanceMetadata_robotPlugin(t *testing.T) {
	tests := []struct {
		name       string
		labeler    *labeler
		wantLabels map[string]string
		wantEvents []string
	}{
		{
			name:       "the plugin's labels are added and provided-by stays robot",
			labeler:    &labeler{labels: map[string]string{"example.com/product": "auction", "instance.hetzner.cloud/provided-by": "cloud"}},
			wantLabels: map[string]string{"example.com/product": "auction", "instance.hetzner.cloud/provided-by": "robot"},
		},
		{
			name:       "a failing plugin leaves the built-in labels and a Warning event",
			labeler:    &labeler{err: errors.New("boom")},
			wantLabels: map[string]string{"instance.hetzner.cloud/provided-by": "robot"},
			wantEvents: []string{"Warning PluginFailed node_labels plugin failed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			i, _ := newRobotInstancesWith(t, config.AddressFamilyDualStack, false, rec, tc.labeler)
			md, err := i.InstanceMetadata(t.Context(), newNode("bm-1"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, md.AdditionalLabels); diff != "" {
				t.Errorf("AdditionalLabels mismatch (-want +got):\n%s", diff)
			}
			checkEvents(t, rec, tc.wantEvents)
			want := []plugins.NodeInput{{
				NodeName: "bm-1", NodeLabels: map[string]string{"role": "worker"},
				Server: plugins.Server{
					ID: 321, Name: "bm-1", Type: "Server-Auction", Location: "fsn1", Datacenter: "fsn1-dc16",
					Labels: map[string]string{}, PublicIPv4: "203.0.113.5", PublicIPv6: "2001:db8:1::1",
					PrivateNets: []plugins.PrivateNet{},
					Robot:       &plugins.RobotServer{Product: "Server Auction", DataCenter: "FSN1-DC16"},
				},
			}}
			if diff := cmp.Diff(want, tc.labeler.got); diff != "" {
				t.Errorf("plugin input mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func checkEvents(t *testing.T, rec *record.FakeRecorder, want []string) {
	t.Helper()
	for _, w := range want {
		select {
		case ev := <-rec.Events:
			if !strings.HasPrefix(ev, w) {
				t.Errorf("event %q, want prefix %q", ev, w)
			}
		default:
			t.Errorf("missing event %q", w)
		}
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("unexpected event %q", ev)
	default:
	}
}

func TestInstances_robotExistsAndShutdown(t *testing.T) {
	tests := []struct {
		name                     string
		node                     *corev1.Node
		wantExists, wantShutdown bool
		wantErr                  string
		wantEvents               []string
	}{
		{name: "a running Robot server exists and is not shut down", node: newNode("bm-1", withProviderID("hrobot://321")), wantExists: true},
		{name: "a Robot server whose reset status is shut off is shut down", node: newNode("bm-off"), wantExists: true, wantShutdown: true},
		{name: "a Robot server number not in the account does not exist", node: newNode("bm-9", withProviderID("hrobot://999")), wantErr: "instance not found"},
		{name: "a Robot server with another name does not exist (reused server)", node: newNode("old-name", withProviderID("hrobot://321")),
			wantErr: "instance not found", wantEvents: []string{"Warning PossibleNodeDeletion Robot server 321", "Warning PossibleNodeDeletion Robot server 321"}},
		{name: "a name of both a cloud and a Robot server is an error", node: newNode("both"),
			wantErr: `found both a cloud server`, wantEvents: []string{"Warning InstanceLookupFailed", "Warning InstanceLookupFailed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			i, emu := newRobotInstances(t, config.AddressFamilyIPv4, true, rec)
			exists, err := i.InstanceExists(t.Context(), tc.node)
			lookupErr := tc.wantErr != "" && tc.wantErr != "instance not found"
			if (err != nil) != lookupErr || exists != tc.wantExists {
				t.Errorf("InstanceExists() = %v, %v, want %v", exists, err, tc.wantExists)
			}
			shutdown, err := i.InstanceShutdown(t.Context(), tc.node)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) || shutdown != tc.wantShutdown {
				t.Errorf("InstanceShutdown() = %v, %v, want %v, error containing %q", shutdown, err, tc.wantShutdown, tc.wantErr)
			}
			if tc.wantErr == "instance not found" && !errors.Is(err, cloudprovider.InstanceNotFound) {
				t.Errorf("InstanceShutdown() error %v does not wrap InstanceNotFound", err)
			}
			checkEvents(t, rec, tc.wantEvents)
			if n := emu.Requests()["GET /server/{n}"]; n != 0 {
				t.Errorf("GET /server/{n} = %d, want 0 (lookups are served from the cached list)", n)
			}
		})
	}
}

func TestRobotInstanceType(t *testing.T) {
	for in, want := range map[string]string{"AX41-NVMe": "AX41-NVMe", "Server Auction": "Server-Auction", "EX44 (DE)": "EX44-DE", "": ""} {
		if got := instances.RobotInstanceType(in); got != want {
			t.Errorf("RobotInstanceType(%q) = %q, want %q", in, got, want)
		}
	}
}
