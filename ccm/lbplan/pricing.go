package lbplan

import (
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Pricing is what the steps of a plan are priced with (Plan.Pricing).
type Pricing struct {
	// Inventory is the load balancers the cluster manages before the plan's first step.
	Inventory input.Inventory
	// Prices are the monthly prices per type and location.
	Prices inventory.Prices
}

// TypePrices reads the monthly prices per location of types (hcloud-go's Pricings, the answer of
// GET /load_balancer_types): the one conversion the CCM's type cache and `plan --from-api` use.
func TypePrices(types []*hcloud.LoadBalancerType) (inventory.Prices, error) {
	var rows []inventory.Row
	for _, t := range types {
		for _, p := range t.Pricings {
			if p.Location == nil {
				continue
			}
			rows = append(rows, inventory.Row{
				Type: t.Name, Location: p.Location.Name, NetworkZone: string(p.Location.NetworkZone),
				MonthlyNet: p.Monthly.Net, MonthlyGross: p.Monthly.Gross,
			})
		}
	}
	return inventory.NewPrices(rows)
}
