package hcloudemu_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestContract_LoadBalancerTypePrices: hcloud-go reads the placeholder prices of every type in
// every location from the list and by ID, a seed's type replaces them, and the raw body of the
// list is what inventory.ParsePrices (and `plan --prices`) reads.
func TestContract_LoadBalancerTypePrices(t *testing.T) {
	seeded := hcloudemu.WithSeed(hcloudemu.Seed{LoadBalancerTypes: []schema.LoadBalancerType{{
		ID: 2, Name: "lb21", MaxServices: 15, MaxTargets: 75,
		Prices: []schema.PricingLoadBalancerTypePrice{{Location: "nbg1", PriceMonthly: schema.Price{Net: "7.5000", Gross: "8.9250"}}},
	}}})
	w := newWorld(t, seeded)
	types, err := w.client.LoadBalancerType.All(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	monthly := map[string]hcloud.Price{}
	for _, lt := range types {
		for _, p := range lt.Pricings {
			monthly[lt.Name+"@"+p.Location.Name] = p.Monthly
		}
	}
	for _, tc := range []struct {
		key, net, gross string
	}{
		{"lb11@fsn1", "5.0000000000", "5.9500000000"},
		{"lb31@sin", "20.0000000000", "23.8000000000"},
		{"lb21@nbg1", "7.5000", "8.9250"},
	} {
		if got := monthly[tc.key]; got.Net != tc.net || got.Gross != tc.gross {
			t.Errorf("monthly price of %s = %+v, want net %s gross %s", tc.key, got, tc.net, tc.gross)
		}
	}
	if _, ok := monthly["lb21@fsn1"]; ok {
		t.Errorf("the seed's lb21 lists only nbg1, got a price in fsn1 too")
	}
	lt, _, err := w.client.LoadBalancerType.GetByID(ctx(t), 3)
	if err != nil || lt == nil || len(lt.Pricings) != 6 || lt.Pricings[0].Monthly.Net != "20.0000000000" {
		t.Errorf("GetByID(3) = %+v, %v; want lb31 priced in the 6 default locations", lt, err)
	}

	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, w.endpoint+"/load_balancer_types", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.emu.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	prices, err := inventory.ParsePrices(body)
	if err != nil {
		t.Fatal(err)
	}
	cost := inventory.StepCost(nil, &input.LoadBalancer{Type: "lb21", NetworkZone: "eu-central"}, prices)
	if cost.After != (input.Amount{MonthlyNet: 7.5, MonthlyGross: 8.925}) {
		t.Errorf("lb21 in eu-central from the parsed body = %+v, want 7.5/8.925", cost.After)
	}
}
