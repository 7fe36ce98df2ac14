package executor

import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// InventorySource gives the gate the inventory and the prices that the inputs of load balancer
// steps carry (input.inventory, input.cost; Inputs with lbplan.Plan.Pricing).
type InventorySource interface {
	// Pricing returns the load balancers the cluster manages as the CCM's caches hold them now,
	// with the prices; nil when it knows none. It MUST answer from memory: a decision adds no
	// Hetzner request (TestInventory_decisionsAddNoRequest in ccm/loadbalancer).
	Pricing() *lbplan.Pricing
}

// SetInventory makes the gate price the load balancer plans it decides with src (the load
// balancer code's caches: loadbalancer.New calls it). Call it before the first Run; without it,
// inputs carry no inventory and no cost.
func (x *Executor) SetInventory(src InventorySource) { x.inventory.Store(&src) }

// withPricing returns plan with the Pricing of the inventory source, unless the plan has one
// already (`plan` sets its own) or no policy is in force (nothing reads the inventory, and
// without a policy the CCM behaves as the official one, which has none).
func (x *Executor) withPricing(plan lbplan.Plan) lbplan.Plan {
	if plan.Pricing != nil {
		return plan
	}
	if _, named := x.PolicyRevision(); !named {
		return plan
	}
	if src := x.inventory.Load(); src != nil {
		plan.Pricing = (*src).Pricing()
	}
	return plan
}
