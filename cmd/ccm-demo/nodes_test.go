package main

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestNetworkIPs: with --routes the demo registers each Node with its server's IP in the
// network (networkIPs), so the route controller never meets a Node without an InternalIP: the
// seeded IPs, and for worker-3 (seeded without one) the IP the emulator assigned, inside the
// network's subnet. Another network name gives none.
func TestNetworkIPs(t *testing.T) {
	seed, err := hcloudemu.LoadSeedFile(filepath.Join("..", "..", "examples", "emulator", "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	emu := hcloudemu.New(hcloudemu.WithSeed(seed))
	if err := emu.SeedError(); err != nil {
		t.Fatal(err)
	}
	ips := networkIPs(emu, seed, networkName)
	for name, want := range map[string]string{"control-plane-1": "10.0.0.2", "worker-1": "10.0.0.3", "worker-2": "10.0.0.4"} {
		if ips[name] != want {
			t.Errorf("%s: InternalIP %q, want %q (seeded)", name, ips[name], want)
		}
	}
	subnet := netip.MustParsePrefix("10.0.0.0/16")
	if ip, err := netip.ParseAddr(ips["worker-3"]); err != nil || !subnet.Contains(ip) {
		t.Errorf("worker-3: InternalIP %q, want the emulator's in %s", ips["worker-3"], subnet)
	}
	for _, s := range seed.Servers {
		if s.Status == "" || s.Status == "running" {
			if ips[s.Name] == "" {
				t.Errorf("running server %s has no InternalIP: its Node would wait for the CCM", s.Name)
			}
		}
	}
	if other := networkIPs(emu, seed, "no-such-network"); len(other) != 0 {
		t.Errorf("another network: %v, want none", other)
	}
}
