package ciplan

import (
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Cost is a monthly price before and after a plan: of one Service's load balancer
// (ServiceResult.Cost) or of every load balancer the cluster manages (Report.Cost). Amounts are
// monthly, net and gross, in Currency, from the prices plan was given (--prices, --from-api).
type Cost struct {
	// Known is false when plan had no prices, or when the prices list none for a load
	// balancer's type and location; such a load balancer counts as 0.
	Known bool `json:"known"`
	// Currency is the currency of the amounts, "EUR".
	Currency string `json:"currency"`
	// Before is the monthly price before the plan (0 for a Service whose load balancer does
	// not exist yet).
	Before input.Amount `json:"before"`
	// After is the monthly price once the plan ran. For a Service it is the price of the
	// load balancer its plan asks for, allowed or not (0 when it deletes it); for the report it
	// is the total after the steps that run.
	After input.Amount `json:"after"`
	// Delta is After - Before.
	Delta input.Amount `json:"delta"`
}

// costs keeps the inventory plan decides with: the load balancers of the state (--state,
// --from-api, or none), then, Service by Service in the order they are planned, the result of
// each plan's steps that run (inventory.Apply). So the plan's own creates are the inventory of
// the Services after them, as the CCM's results are for its next decision.
type costs struct {
	prices inventory.Prices
	inv    input.Inventory
}

// newCosts returns the costs of st, priced by p. A load balancer of st is in the inventory
// when the CCM manages it: a group's (owned by the group, in its home namespace), or a
// Service's, owned by the Service of m with its UID (a Service m does not contain counts in
// namespace "").
func newCosts(st State, m Manifests, p inventory.Prices) *costs {
	byUID := map[string]input.Owner{}
	for _, mf := range m.Services {
		svc := WithAPIDefaults(mf.Service)
		byUID[string(svc.UID)] = input.Owner{Kind: inventory.OwnerService, Namespace: svc.Namespace, Name: svc.Name}
	}
	var entries []inventory.Entry
	for _, lb := range st.LoadBalancers {
		var owner input.Owner
		switch group, uid := lb.Labels[lbplan.LabelGroup], lb.Labels[lbplan.LabelServiceUID]; {
		case group != "":
			owner = input.Owner{Kind: inventory.OwnerGroup, Namespace: lb.Labels[lbplan.LabelGroupNamespace], Name: group}
		case uid != "":
			owner = byUID[uid]
			owner.Kind = inventory.OwnerService
		default:
			continue // not the CCM's
		}
		entries = append(entries, entryOf(lb, owner))
	}
	return &costs{prices: p, inv: inventory.Build(entries, p)}
}

// entryOf is lb as an inventory entry.
func entryOf(lb *hcloud.LoadBalancer, owner input.Owner) inventory.Entry {
	e := inventory.Entry{ID: lb.ID, Name: lb.Name, Owner: owner, Listeners: len(lb.Services), Targets: len(lb.Targets)}
	if lb.LoadBalancerType != nil {
		e.Type = lb.LoadBalancerType.Name
	}
	if lb.Location != nil {
		e.Location, e.NetworkZone = lb.Location.Name, string(lb.Location.NetworkZone)
	}
	return e
}

// pricing is what the next plan is decided against: the current inventory and the prices.
func (c *costs) pricing() *lbplan.Pricing {
	return &lbplan.Pricing{Inventory: c.inv, Prices: c.prices}
}

// applied puts the steps of v that run into the inventory.
func (c *costs) applied(v gate.Verdict) {
	for _, sv := range v.Steps {
		if sv.Runs {
			c.inv = inventory.Apply(c.inv, sv.Input, c.prices)
		}
	}
}

// serviceCost is the cost of a Service's plan from before to after (either nil: none).
func (c *costs) serviceCost(before, after *input.LoadBalancer) *Cost {
	sc := inventory.StepCost(before, after, c.prices)
	return &Cost{
		Known: c.prices.Knows(before) && c.prices.Knows(after), Currency: sc.Currency,
		Before: sc.Before, After: sc.After, Delta: sc.Delta,
	}
}

// total is the cost of every managed load balancer from the inventory before (of the state) to
// the current one; unknown without prices or when one of them has no price.
func (c *costs) total(before input.Inventory) *Cost {
	known := !c.prices.Empty()
	for _, inv := range []input.Inventory{before, c.inv} {
		for _, lb := range inv.LoadBalancers {
			known = known && lb.Price.Known
		}
	}
	b := input.Amount{MonthlyNet: before.Cluster.MonthlyNet, MonthlyGross: before.Cluster.MonthlyGross}
	a := input.Amount{MonthlyNet: c.inv.Cluster.MonthlyNet, MonthlyGross: c.inv.Cluster.MonthlyGross}
	return &Cost{
		Known: known, Currency: c.inv.Currency, Before: b, After: a,
		Delta: input.Amount{MonthlyNet: round(a.MonthlyNet - b.MonthlyNet), MonthlyGross: round(a.MonthlyGross - b.MonthlyGross)},
	}
}

// round rounds to micros, the precision of the inventory's amounts, so a difference of sums
// prints as the sums do.
func round(x float64) float64 {
	if x < 0 {
		return -round(-x)
	}
	return float64(int64(x*1e6+0.5)) / 1e6
}

// costText is a cost for the text output, "+5.00 EUR/month net (+5.95 gross), 5.00 EUR/month
// net (5.95 gross) after", or "unknown (REASON)".
func costText(c *Cost, unknown string) string {
	if c == nil || !c.Known {
		return "unknown (" + unknown + ")"
	}
	return fmt.Sprintf("%+.2f %s/month net (%+.2f gross), %.2f %s/month net (%.2f gross) after",
		c.Delta.MonthlyNet, c.Currency, c.Delta.MonthlyGross, c.After.MonthlyNet, c.Currency, c.After.MonthlyGross)
}
