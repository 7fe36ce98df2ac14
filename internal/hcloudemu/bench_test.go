package hcloudemu_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// benchWorld seeds 1,000 servers in a network and 200 load balancers with a
// service and five private-IP server targets each.
func benchWorld(b *testing.B) (*hcloudemu.Emulator, *hcloud.Client) {
	b.Helper()
	emu, endpoint := hcloudemu.NewTestServer(b)
	nw, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		b.Fatal(err)
	}
	locations := []string{"fsn1", "nbg1", "hel1"}
	for i := range 1000 {
		if _, err := emu.AddServer(hcloudemu.ServerSpec{
			Name: fmt.Sprintf("node-%04d", i), Location: locations[i%3],
			Labels: map[string]string{"pool": fmt.Sprintf("p%d", i%10)}, Networks: []hcloudemu.ServerNetwork{{NetworkID: nw}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
		hcloud.WithHTTPClient(&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}))
	ctx := context.Background()
	for i := range 200 {
		res, _, err := client.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{
			Name: fmt.Sprintf("lb-%03d", i), LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"},
			Location: &hcloud.Location{Name: "fsn1"}, Network: &hcloud.Network{ID: nw},
			Labels: map[string]string{"hcloud-ccm/service-uid": fmt.Sprintf("uid-%03d", i)},
		})
		if err != nil {
			b.Fatal(err)
		}
		lb := res.LoadBalancer
		if _, _, err := client.LoadBalancer.AddService(ctx, lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80), DestinationPort: hcloud.Ptr(30080)}); err != nil {
			b.Fatal(err)
		}
		for j := range 5 {
			if _, _, err := client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{
				Server: &hcloud.Server{ID: int64((i*5+j)%1000 + 1)}, UsePrivateIP: hcloud.Ptr(true),
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	emu.ResetRequests()
	return emu, client
}

// reportReqs reports API requests per second over the timed part.
func reportReqs(b *testing.B, emu *hcloudemu.Emulator) {
	n := 0
	for _, c := range emu.Counts() {
		n += c
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(n)/float64(b.N), "req/op")
}

// BenchmarkEmulator measures the emulator with 1,000 servers and 200 load
// balancers, through a real hcloud-go client, on the calls the CCM makes.
func BenchmarkEmulator(b *testing.B) {
	emu, client := benchWorld(b)
	ctx := context.Background()

	b.Run("ServerAll", func(b *testing.B) {
		emu.ResetRequests()
		for b.Loop() {
			servers, err := client.Server.All(ctx)
			if err != nil || len(servers) != 1000 {
				b.Fatalf("All = %d, %v", len(servers), err)
			}
		}
		reportReqs(b, emu)
	})
	b.Run("ServerGetByIDParallel", func(b *testing.B) {
		emu.ResetRequests()
		b.RunParallel(func(pb *testing.PB) {
			id := int64(1)
			for pb.Next() {
				if s, _, err := client.Server.GetByID(ctx, id); err != nil || s == nil {
					b.Errorf("GetByID(%d) = %v, %v", id, s, err)
					return
				}
				id = id%1000 + 1
			}
		})
		reportReqs(b, emu)
	})
	b.Run("LoadBalancerByLabelSelector", func(b *testing.B) {
		emu.ResetRequests()
		i := 0
		for b.Loop() {
			lbs, err := client.LoadBalancer.AllWithOpts(ctx, hcloud.LoadBalancerListOpts{ListOpts: hcloud.ListOpts{
				LabelSelector: fmt.Sprintf("hcloud-ccm/service-uid=uid-%03d", i%200)}})
			if err != nil || len(lbs) != 1 {
				b.Fatalf("by label = %d, %v", len(lbs), err)
			}
			i++
		}
		reportReqs(b, emu)
	})
	b.Run("LoadBalancerAddRemoveTargetWithWait", func(b *testing.B) {
		emu.ResetRequests()
		lb := &hcloud.LoadBalancer{ID: 1}
		for b.Loop() {
			a, _, err := client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: 999}, UsePrivateIP: hcloud.Ptr(true)})
			if err == nil {
				err = client.Action.WaitFor(ctx, a)
			}
			if err == nil {
				a, _, err = client.LoadBalancer.RemoveServerTarget(ctx, lb, &hcloud.Server{ID: 999})
			}
			if err == nil {
				err = client.Action.WaitFor(ctx, a)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		reportReqs(b, emu)
	})
}
