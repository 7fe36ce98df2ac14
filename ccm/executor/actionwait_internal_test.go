package executor

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestActionWaiter_backoff: the wait between polls doubles while an action runs; once nothing
// is pending the poller ends, so an action registered right after a long one (the next request
// of a detached run) is polled one interval later, not after the long one's backoff.
func TestActionWaiter_backoff(t *testing.T) {
	const interval = 10 * time.Millisecond
	tests := []struct {
		name string
		// slow is how long the first action runs; the second ends at once.
		slow time.Duration
		// wantSecondUnder bounds the wait for the second action: the doubled wait after a 300 ms
		// action would be 320 ms.
		wantSecondUnder time.Duration
	}{
		{"after a long action", 300 * time.Millisecond, 200 * time.Millisecond},
		{"after a short action", 0, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithCommandDelay("add_route", tc.slow))
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
			if err := w.wait(ctx, client, b); err != nil {
				t.Fatalf("wait for delete_route: %v", err)
			}
			if took := time.Since(start); took >= tc.wantSecondUnder {
				t.Errorf("the second action was awaited for %v, want under %v (the first interval is %v)", took, tc.wantSecondUnder, interval)
			}
		})
	}
}
