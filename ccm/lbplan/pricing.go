package lbplan

import (
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
