package hcloudemu_test

import (
	"net"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

func TestLoadBalancerWire_SubObjectsThatDoNotApplyAreAbsent(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lb := createLB(t, w, "web")
	a, resp, err := c.LoadBalancer.AddService(ctx(t), lb, hcloudAddTCPService(80))
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}, UsePrivateIP: hcloud.Ptr(true)})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.AddIPTarget(ctx(t), lb, hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP("192.0.2.77")})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.AddLabelSelectorTarget(ctx(t), lb, hcloud.LoadBalancerAddLabelSelectorTargetOpts{Selector: "role=none", UsePrivateIP: hcloud.Ptr(true)})
	mustWait(t, c, a, resp, err)

	for _, path := range []string{"/v1/load_balancers/" + jsonNumber(lb.ID), "/v1/load_balancers"} {
		body := rawGet(t, w, path)
		for _, null := range []string{`"http":null`, `"server":null`, `"label_selector":null`, `"ip":null`} {
			if strings.Contains(body, null) {
				t.Errorf("GET %s has %s: %s", path, null, body)
			}
		}
		if !strings.Contains(body, `"label_selector":{"selector":"role=none"},"targets":[]`) {
			t.Errorf("GET %s: the label selector target matching nothing has no \"targets\":[]: %s", path, body)
		}
	}
	got, _, err := c.LoadBalancer.GetByID(ctx(t), lb.ID)
	if err != nil || len(got.Services) != 1 || got.Services[0].HealthCheck.HTTP != nil || len(got.Targets) != 3 {
		t.Fatalf("hcloud-go reads %+v, %v", got, err)
	}
}
