package inventory

import "github.com/policy-ccm/hcloud-policy-ccm/policy/input"

// Knows reports whether p lists the price of lb's type at its location (or, for a load
// balancer that names only a network zone, in that zone). A nil lb has nothing to price: true.
// StepCost counts a price it does not know as 0; callers that show a cost use Knows to say it
// is unknown instead.
func (p Prices) Knows(lb *input.LoadBalancer) bool {
	if lb == nil {
		return true
	}
	_, ok := p.lookup(lb.Type, lb.Location, lb.NetworkZone)
	return ok
}
