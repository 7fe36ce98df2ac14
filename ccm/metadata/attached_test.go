package metadata_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/metadata"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

func TestCheckAttached(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name string
		// self is the metadata server: "in-k8s", "in-other", "no-networks" or "" (none).
		self    string
		cfg     func(c *config.Network, endpoint string)
		noNet   bool          // HCLOUD_NETWORK unset
		delay   time.Duration // metadata replies are delayed this long
		wantErr []string      // empty: want nil
		// wantRequests is the number of metadata requests, -1 to skip the check.
		wantRequests int
	}{
		{name: "a server attached to the network passes with one request", self: "in-k8s", wantRequests: 1},
		{
			name: "a server in another network fails naming the variables, the server and its networks",
			self: "in-other",
			wantErr: []string{`not attached to network "k8s" (ID 1)`, "HCLOUD_NETWORK", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
				"this server (ID 11)", "lists networks [2]"},
			wantRequests: 2,
		},
		{
			name:         "a server without private networks fails",
			self:         "no-networks",
			wantErr:      []string{"this server (ID 12) is not attached", "lists networks []", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"},
			wantRequests: 2,
		},
		{
			name:         "a metadata service that does not answer in time fails within the timeout, naming the endpoint",
			self:         "in-k8s",
			delay:        5 * time.Second,
			wantErr:      []string{"metadata service at http://", "/hetzner/v1/metadata", "timeout 200ms", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true"},
			wantRequests: 1,
		},
		{
			name:         "a metadata error answer fails naming the endpoint",
			self:         "",
			wantErr:      []string{"metadata service at http://", "response status was 404", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"},
			wantRequests: 1,
		},
		{
			name:         "an unreachable endpoint fails naming it",
			cfg:          func(c *config.Network, _ string) { c.MetadataEndpoint = "http://127.0.0.1:1/hetzner/v1/metadata" },
			wantErr:      []string{"metadata service at http://127.0.0.1:1/hetzner/v1/metadata", "HCLOUD_METADATA_ENDPOINT"},
			wantRequests: 0,
		},
		{
			name:         "a bad HCLOUD_METADATA_ENDPOINT is named with an example",
			cfg:          func(c *config.Network, _ string) { c.MetadataEndpoint = "169.254.169.254" },
			wantErr:      []string{`invalid value for "HCLOUD_METADATA_ENDPOINT": "169.254.169.254"`, "http://169.254.169.254/hetzner/v1/metadata"},
			wantRequests: 0,
		},
		{
			name:         "the disabled check sends no request, even for a server outside the network",
			self:         "in-other",
			cfg:          func(c *config.Network, _ string) { c.DisableAttachedCheck = true },
			wantRequests: 0,
		},
		{
			name:         "without HCLOUD_NETWORK nothing is checked",
			self:         "in-other",
			noNet:        true,
			wantRequests: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithMetadataServer(tc.self))
			k8s := addNetwork(t, emu, "k8s", "10.0.0.0/8", "10.0.0.0/16")
			other := addNetwork(t, emu, "other", "192.168.0.0/16", "192.168.1.0/24")
			for _, s := range []hcloudemu.ServerSpec{
				{ID: 10, Name: "in-k8s", Networks: []hcloudemu.ServerNetwork{{NetworkID: other}, {NetworkID: k8s}}},
				{ID: 11, Name: "in-other", Networks: []hcloudemu.ServerNetwork{{NetworkID: other}}},
				{ID: 12, Name: "no-networks"},
			} {
				if _, err := emu.AddServer(s); err != nil {
					t.Fatal(err)
				}
			}
			if tc.delay > 0 {
				emu.AddFault(hcloudemu.Fault{Pattern: hcloudemu.MetadataPath + "/*", Delay: tc.delay})
			}
			cfg := config.Network{NameOrID: "k8s", MetadataEndpoint: hcloudemu.MetadataEndpoint(endpoint)}
			if tc.cfg != nil {
				tc.cfg(&cfg, endpoint)
			}
			network := &hcloud.Network{ID: k8s, Name: "k8s"}
			if tc.noNet {
				cfg.NameOrID, network = "", nil
			}

			start := time.Now()
			err := metadata.CheckAttached(context.Background(), cfg, network, metadata.WithTimeout(timeout))
			if took := time.Since(start); took > 3*timeout {
				t.Errorf("CheckAttached took %v, want at most %v", took, 3*timeout)
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("CheckAttached() = %v, want nil", err)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("CheckAttached() = nil, want an error with %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
			}
			if tc.wantRequests >= 0 {
				if n := emu.MetadataRequests(); n != tc.wantRequests {
					t.Errorf("metadata requests = %d, want %d", n, tc.wantRequests)
				}
			}
			if n := len(emu.Requests()); n != 0 {
				t.Errorf("%d API requests, want 0", n)
			}
		})
	}
}

// TestCheckAttached_DefaultEndpoint pins the endpoint the official CCM uses (hcloud-go's
// metadata client default).
func TestCheckAttached_DefaultEndpoint(t *testing.T) {
	if want := "http://169.254.169.254/hetzner/v1/metadata"; metadata.DefaultEndpoint != want {
		t.Errorf("DefaultEndpoint = %q, want %q", metadata.DefaultEndpoint, want)
	}
}

func addNetwork(t *testing.T, emu *hcloudemu.Emulator, name, ipRange, subnet string) int64 {
	t.Helper()
	id, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: name, IPRange: ipRange,
		Subnets: []hcloudemu.SubnetSpec{{IPRange: subnet, NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatalf("add network %s: %v", name, err)
	}
	return id
}
