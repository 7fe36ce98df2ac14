package hcloudemu_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/metadata"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// privateNetwork is one entry of the metadata service's private-networks list.
type privateNetwork struct {
	IP           string   `json:"ip"`
	AliasIPs     []string `json:"alias_ips"`
	InterfaceNum int      `json:"interface_num"`
	MACAddress   string   `json:"mac_address"`
	NetworkID    int64    `json:"network_id"`
	NetworkName  string   `json:"network_name"`
	Network      string   `json:"network"`
	Subnet       string   `json:"subnet"`
	Gateway      string   `json:"gateway"`
}

func TestMetadata_AnswersForTheConfiguredServerThroughHcloudGo(t *testing.T) {
	w := newWorld(t, hcloudemu.WithMetadataServer("node-2"), hcloudemu.WithRateLimit(1))
	other, err := w.emu.AddNetwork(hcloudemu.NetworkSpec{Name: "other", IPRange: "192.168.0.0/16",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "192.168.1.0/24", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatal(err)
	}
	self, err := w.emu.AddServer(hcloudemu.ServerSpec{Name: "self", Location: "hel1", PublicIPv4: "203.0.113.200",
		Networks: []hcloudemu.ServerNetwork{{NetworkID: w.network, IP: "10.0.0.9"}, {NetworkID: other}}})
	if err != nil {
		t.Fatal(err)
	}
	// The rate limit of 1 request per hour would stop a second API request:
	// the metadata service is not rate limited and needs no token.
	w.emu.SetMetadataServer("self")
	mc := metadata.NewClient(metadata.WithEndpoint(hcloudemu.MetadataEndpoint(w.endpoint)), metadata.WithTimeout(2*time.Second))

	id, err := mc.InstanceIDWithContext(t.Context())
	if err != nil || id != self {
		t.Errorf("InstanceID() = %d, %v; want %d", id, err, self)
	}
	for name, tc := range map[string]struct {
		get  func(context.Context) (string, error)
		want string
	}{
		"hostname":          {mc.HostnameWithContext, "self"},
		"region":            {mc.RegionWithContext, "eu-central"},
		"availability-zone": {mc.AvailabilityZoneWithContext, "hel1-dc2"},
	} {
		if got, err := tc.get(t.Context()); err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, tc.want)
		}
	}
	if ip, err := mc.PublicIPv4WithContext(t.Context()); err != nil || ip.String() != "203.0.113.200" {
		t.Errorf("PublicIPv4() = %v, %v", ip, err)
	}
	raw, err := mc.PrivateNetworksWithContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var nets []privateNetwork
	if err := yaml.Unmarshal([]byte(raw), &nets); err != nil {
		t.Fatalf("private-networks is not YAML: %v\n%s", err, raw)
	}
	if len(nets) != 2 {
		t.Fatalf("private-networks = %+v, want 2 entries", nets)
	}
	first := nets[0]
	if first.IP != "10.0.0.9" || first.NetworkID != w.network || first.NetworkName != "k8s" || first.Network != "10.0.0.0/8" ||
		first.Subnet != "10.0.0.0/16" || first.Gateway != "10.0.0.1" || first.InterfaceNum != 1 || first.MACAddress == "" {
		t.Errorf("first network = %+v", first)
	}
	if second := nets[1]; second.NetworkID != other || second.Subnet != "192.168.1.0/24" || second.Gateway != "192.168.0.1" || second.InterfaceNum != 2 {
		t.Errorf("second network = %+v", second)
	}
	// The official CCM's test: a substring "network_id: <id>\n".
	if !strings.Contains(raw, fmt.Sprintf("network_id: %d\n", w.network)) {
		t.Errorf("private-networks lacks %q:\n%s", fmt.Sprintf("network_id: %d\\n", w.network), raw)
	}
	if n := len(w.emu.Requests()); n != 0 {
		t.Errorf("API request log has %d entries, want 0 (metadata requests are not API requests)", n)
	}
	if n := w.emu.MetadataRequests(); n != 6 {
		t.Errorf("MetadataRequests() = %d, want 6", n)
	}
}

func TestMetadata_Selection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, w world)
		wantID func(w world) int64 // 0 = want an error
	}{
		{"no server configured answers 404", func(*testing.T, world) {}, nil},
		{"a server by ID", func(_ *testing.T, w world) { w.emu.SetMetadataServer(fmt.Sprint(w.servers[2])) },
			func(w world) int64 { return w.servers[2] }},
		{"a missing server answers 404", func(_ *testing.T, w world) { w.emu.SetMetadataServer("ghost") }, nil},
		{"a deleted server answers 404", func(t *testing.T, w world) {
			w.emu.SetMetadataServer("node-1")
			if err := w.emu.DeleteServer(w.servers[0]); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"the seed's metadata_server", func(t *testing.T, w world) {
			if err := w.emu.ApplySeed(hcloudemu.Seed{MetadataServer: "node-3"}); err != nil {
				t.Fatal(err)
			}
		}, func(w world) int64 { return w.servers[2] }},
		{"the admin endpoint", func(t *testing.T, w world) {
			status, body, _ := rawRequest(t, w.emu, "PUT", strings.TrimSuffix(w.endpoint, "/v1")+"/_emu/metadata", `{"server":"node-2"}`)
			if status != http.StatusOK {
				t.Fatalf("PUT /_emu/metadata = %d %s", status, body)
			}
		}, func(w world) int64 { return w.servers[1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(t, w)
			mc := metadata.NewClient(metadata.WithEndpoint(hcloudemu.MetadataEndpoint(w.endpoint)), metadata.WithTimeout(2*time.Second))
			id, err := mc.InstanceIDWithContext(t.Context())
			if tc.wantID == nil {
				if err == nil || !strings.Contains(err.Error(), "404") {
					t.Errorf("InstanceID() = %d, %v; want a 404 error", id, err)
				}
				return
			}
			if want := tc.wantID(w); err != nil || id != want {
				t.Errorf("InstanceID() = %d, %v; want %d", id, err, want)
			}
		})
	}
}

func TestMetadata_ResetRestoresTheOptionAndFaultsApply(t *testing.T) {
	w := newWorld(t, hcloudemu.WithMetadataServer("node-1"))
	w.emu.SetMetadataServer("node-2")
	w.emu.Reset()
	// Reset drops the servers of newWorld; add node-1 back.
	id, err := w.emu.AddServer(hcloudemu.ServerSpec{Name: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	mc := metadata.NewClient(metadata.WithEndpoint(hcloudemu.MetadataEndpoint(w.endpoint)), metadata.WithTimeout(100*time.Millisecond))
	if got, err := mc.InstanceIDWithContext(t.Context()); err != nil || got != id {
		t.Errorf("after Reset InstanceID() = %d, %v; want %d (WithMetadataServer)", got, err, id)
	}
	w.emu.AddFault(hcloudemu.Fault{Pattern: hcloudemu.MetadataPath + "/*", Delay: time.Second})
	start := time.Now()
	if _, err := mc.PrivateNetworksWithContext(t.Context()); err == nil {
		t.Error("PrivateNetworks() with a 1s delay and a 100ms client timeout succeeded")
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("timed out after %v, want about 100ms", d)
	}
}
