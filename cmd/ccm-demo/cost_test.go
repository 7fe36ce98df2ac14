package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestCost: the report prices the load balancers the CCM created (a Service's and a group's)
// with the emulator's placeholder prices, read as a client reads them, and leaves out one
// the CCM does not manage.
func TestCost(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	add := func(s hcloudemu.LoadBalancerSpec) int64 {
		id, err := emu.AddLoadBalancer(s)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	web := add(hcloudemu.LoadBalancerSpec{Name: "web-lb", Labels: map[string]string{lbplan.LabelServiceUID: "u1"}})
	add(hcloudemu.LoadBalancerSpec{Name: "shared", Type: "lb31", Location: "nbg1", Labels: map[string]string{lbplan.LabelGroup: "web", lbplan.LabelGroupNamespace: "shop"}})
	add(hcloudemu.LoadBalancerSpec{Name: "seeded"})
	prices, err := readPrices(endpoint, emu.Token())
	if err != nil {
		t.Fatal(err)
	}
	services := []serviceState{{demoService: demoService{namespace: "default", name: "web"}, lbID: web}}
	c := &demoCost{inventory: costOf(emu.LoadBalancers(), services, prices)}
	var buf bytes.Buffer
	writeCost(&buf, c)
	lb11, lb31 := float64(hcloudemu.PlaceholderMonthlyNet["lb11"]), float64(hcloudemu.PlaceholderMonthlyNet["lb31"])
	if got := c.inventory.Cluster.MonthlyNet; got != lb11+lb31 {
		t.Errorf("total %v a month, want lb11 + lb31 = %v", got, lb11+lb31)
	}
	for _, want := range []string{
		"(the emulator's placeholder prices, not Hetzner's)",
		"web-lb         service default/web  lb11  fsn1      5.00   5.95",
		"shared         group shop/web       lb31  nbg1      20.00  23.80",
		"total: 2 load balancers, 25.00 EUR net (29.75 gross) a month",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "seeded") {
		t.Errorf("a load balancer the CCM does not manage is priced:\n%s", buf.String())
	}

	buf.Reset()
	writeCost(&buf, &demoCost{err: errors.New("read prices: GET /load_balancer_types: 500")})
	if !strings.Contains(buf.String(), "Monthly cost of the load balancers: unknown (read prices: GET /load_balancer_types: 500)") {
		t.Errorf("no price list: %s", buf.String())
	}
}
