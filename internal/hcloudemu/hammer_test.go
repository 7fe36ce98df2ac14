package hcloudemu_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestHammer_ConcurrentClientsKeepTheStateConsistent runs clients that each
// build their own load balancer while others list and read, and while the
// test changes servers; run it with -race.
func TestHammer_ConcurrentClientsKeepTheStateConsistent(t *testing.T) {
	w := newWorld(t)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for i := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("hammer-%d", i)
			res, _, err := w.client.LoadBalancer.Create(ctx(t), hcloud.LoadBalancerCreateOpts{
				Name: name, LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "nbg1"},
				Network: &hcloud.Network{ID: w.network}, Labels: map[string]string{"hcloud-ccm/service-uid": name},
			})
			if err != nil {
				errs <- err
				return
			}
			steps := []func() (*hcloud.Action, *hcloud.Response, error){
				func() (*hcloud.Action, *hcloud.Response, error) {
					return w.client.LoadBalancer.AddService(ctx(t), res.LoadBalancer, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)})
				},
				func() (*hcloud.Action, *hcloud.Response, error) {
					return w.client.LoadBalancer.AddServerTarget(ctx(t), res.LoadBalancer, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[i%3]}, UsePrivateIP: hcloud.Ptr(true)})
				},
			}
			for _, step := range append([]func() (*hcloud.Action, *hcloud.Response, error){func() (*hcloud.Action, *hcloud.Response, error) { return res.Action, nil, nil }}, steps...) {
				a, _, err := step()
				if err == nil {
					err = w.client.Action.WaitFor(ctx(t), a)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := w.client.LoadBalancer.All(ctx(t)); err != nil {
					errs <- err
					return
				}
				if _, err := w.client.Server.All(ctx(t)); err != nil {
					errs <- err
					return
				}
				if err := w.emu.SetServerLabels(w.servers[i%3], map[string]string{"round": fmt.Sprint(i)}); err != nil {
					errs <- err
					return
				}
				_ = w.emu.Requests()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lbs := w.emu.LoadBalancers()
	if len(lbs) != workers {
		t.Fatalf("load balancers = %d, want %d", len(lbs), workers)
	}
	ips := map[string]bool{}
	for _, lb := range lbs {
		if len(lb.Services) != 1 || len(lb.Targets) != 1 || len(lb.PrivateNet) != 1 {
			t.Errorf("%s: services %d targets %d nets %d", lb.Name, len(lb.Services), len(lb.Targets), len(lb.PrivateNet))
			continue
		}
		if ips[lb.PrivateNet[0].IP] || ips[lb.PublicNet.IPv4.IP] {
			t.Errorf("%s: IP handed out twice: %s / %s", lb.Name, lb.PrivateNet[0].IP, lb.PublicNet.IPv4.IP)
		}
		ips[lb.PrivateNet[0].IP], ips[lb.PublicNet.IPv4.IP] = true, true
	}
}
