package executor

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestActionWaiter_backoff: the wait between polls doubles while actions are pending, so a
// wait registered after a long action shares the backed-off round (few polls for a burst); a
// wait that blocks something (waitSoon: the next request of a detached run) cuts the round to
// the first interval.
func TestActionWaiter_backoff(t *testing.T) {
	const interval = 10 * time.Millisecond
	// The first action runs 300 ms: polls at 10, 30, 70, 150 and 310 ms, and the next round is
	// due 320 ms after that.
	const slow = 300 * time.Millisecond
	tests := []struct {
		name string
		soon bool
		// the second action (it ends at once) is awaited at least min and less than max.
		min, max time.Duration
	}{
		{"a plain wait joins the backed-off round", false, 200 * time.Millisecond, 2 * time.Second},
		{"waitSoon is polled within the first interval", true, 0, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithCommandDelay("add_route", slow))
			client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()))
			netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
				Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/24", NetworkZone: "eu-central"}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			network := &hcloud.Network{ID: netID}
			_, dst, _ := net.ParseCIDR("10.244.1.0/24")
			route := hcloud.NetworkRoute{Destination: dst, Gateway: net.ParseIP("10.0.0.2")}
			w := &actionWaiter{interval: interval}

			a, _, err := client.Network.AddRoute(ctx, network, hcloud.NetworkAddRouteOpts{Route: route})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.wait(ctx, client, a); err != nil {
				t.Fatalf("wait for add_route: %v", err)
			}
			b, _, err := client.Network.DeleteRoute(ctx, network, hcloud.NetworkDeleteRouteOpts{Route: route})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := w.waitWith(ctx, client, b, tc.soon); err != nil {
				t.Fatalf("wait for delete_route: %v", err)
			}
			if took := time.Since(start); took < tc.min || took >= tc.max {
				t.Errorf("the second action was awaited for %v, want [%v, %v) (first interval %v)", took, tc.min, tc.max, interval)
			}
		})
	}
}
