package hcloudemu_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

func TestResourceActions_ListTheActionsNamingTheResource(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lb := createLB(t, w, "web")
	a, resp, err := c.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}, UsePrivateIP: hcloud.Ptr(true)})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.AddIPTarget(ctx(t), lb, hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP("192.0.2.77")})
	mustWait(t, c, a, resp, err)
	nw := &hcloud.Network{ID: w.network}
	a, resp, err = c.Network.AddRoute(ctx(t), nw, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{
		Destination: mustCIDR(t, "10.100.1.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
	mustWait(t, c, a, resp, err)

	commands := func(as []*hcloud.Action, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, a.Command)
		}
		return out
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"a load balancer's actions, oldest first", commands(c.LoadBalancer.Action.AllFor(ctx(t), lb, hcloud.ActionListOpts{})),
			[]string{"create_load_balancer", "add_target", "add_target"}},
		{"filtered by status", commands(c.LoadBalancer.Action.AllFor(ctx(t), lb, hcloud.ActionListOpts{Status: []hcloud.ActionStatus{hcloud.ActionStatusRunning}})),
			nil},
		{"sorted by command, descending", commands(c.LoadBalancer.Action.AllFor(ctx(t), lb, hcloud.ActionListOpts{Sort: []string{"command:desc"}})),
			[]string{"create_load_balancer", "add_target", "add_target"}},
		{"a network's actions", commands(c.Network.Action.AllFor(ctx(t), nw, hcloud.ActionListOpts{})),
			[]string{"add_route"}},
		{"a server's actions name it as a target", commands(c.Server.Action.AllFor(ctx(t), &hcloud.Server{ID: w.servers[0]}, hcloud.ActionListOpts{})),
			[]string{"add_target"}},
		{"a server without actions", commands(c.Server.Action.AllFor(ctx(t), &hcloud.Server{ID: w.servers[1]}, hcloud.ActionListOpts{})),
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := c.LoadBalancer.Action.AllFor(ctx(t), &hcloud.LoadBalancer{ID: 999}, hcloud.ActionListOpts{}); !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Errorf("actions of an unknown load balancer: err = %v, want not_found", err)
	}
}

func TestLoadBalancerMetrics_EmptySeriesPerRequestedType(t *testing.T) {
	w := newWorld(t)
	lb := createLB(t, w, "web")
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	m, _, err := w.client.LoadBalancer.GetMetrics(ctx(t), lb, hcloud.LoadBalancerGetMetricsOpts{
		Types: []hcloud.LoadBalancerMetricType{hcloud.LoadBalancerMetricOpenConnections, hcloud.LoadBalancerMetricBandwidth},
		Start: start, End: start.Add(time.Hour), Step: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, values := range m.TimeSeries {
		names = append(names, name)
		if len(values) != 0 {
			t.Errorf("series %s = %v, want empty", name, values)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"bandwidth.in", "bandwidth.out", "open_connections"}, names); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	if !m.Start.Equal(start) || !m.End.Equal(start.Add(time.Hour)) || m.Step != 30 {
		t.Errorf("period = %s..%s step %v", m.Start, m.End, m.Step)
	}
}

func TestDatacenters_GoneSinceOctober2026(t *testing.T) {
	w := newWorld(t)
	_, err := w.client.Datacenter.All(ctx(t)) //nolint:staticcheck // the deprecated client is what callers of the removed endpoint use
	if !hcloud.IsError(err, "deprecated_api_endpoint") {
		t.Errorf("Datacenter.All: err = %v, want deprecated_api_endpoint", err)
	}
	_, _, err = w.client.Datacenter.GetByID(ctx(t), 1) //nolint:staticcheck // as above
	if !hcloud.IsError(err, "deprecated_api_endpoint") {
		t.Errorf("Datacenter.GetByID: err = %v, want deprecated_api_endpoint", err)
	}
}
