package executor

import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// InventorySource gives the gate the inventory and the prices that the inputs of load balancer
// steps carry (input.inventory, input.cost; Inputs with lbplan.Plan.Pricing).
type InventorySource interface {
	// Pricing returns the load balancers the cluster manages as the CCM's caches hold them now,
	// with the prices; nil when it knows none. It answers from memory, so a decision adds no
	// Hetzner request (TestInventory_decisionsAddNoRequest in ccm/loadbalancer); before the
	// caches were first filled it may wait for the start-up reads (loadbalancer's Pricing).
	Pricing() *lbplan.Pricing
}

// SetInventory makes the gate price the load balancer plans it decides with src (the load
// balancer code's caches: loadbalancer.New calls it). Call it before the first Run; without it,
// inputs carry no inventory and no cost.
func (x *Executor) SetInventory(src InventorySource) { x.inventory.Store(&src) }

// withPricing returns plan with the Pricing of the inventory source, unless the plan has one
// already (`plan` sets its own) or nothing reads it (ReadsInventory).
func (x *Executor) withPricing(plan lbplan.Plan) lbplan.Plan {
	if plan.Pricing != nil || !x.ReadsInventory() {
		return plan
	}
	if src := x.inventory.Load(); src != nil {
		plan.Pricing = (*src).Pricing()
	}
	return plan
}

// ReadsInventory reports whether the decisions read the inventory: a policy revision is in
// force (PolicyRevision) and, when the decider tells (policy.Engine.ReadsInventory), it names
// input.inventory or input.cost. Without a policy the CCM behaves as the official one, which
// has no inventory, and a policy that does not read it costs no request for it.
func (x *Executor) ReadsInventory() bool {
	if _, named := x.PolicyRevision(); !named {
		return false
	}
	r, ok := x.decider.(interface{ ReadsInventory() bool })
	return !ok || r.ReadsInventory()
}
