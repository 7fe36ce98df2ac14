// Package inventory builds the inventory and cost parts of the policy input (input.inventory,
// input.cost): the load balancers a cluster manages, priced per type and location from the
// Hetzner API's prices (GET /load_balancer_types), with totals per namespace and cluster.
//
// It is pure and a leaf: it imports policy/input and the standard library only, so the CCM,
// the audit, the admission webhook and `plan` share one builder (TestInventoryIsLight in
// ccm/lbplan fails when it imports more). Start with Build, StepCost and Apply; prices come
// from ParsePrices (the JSON body of GET /load_balancer_types) or NewPrices (rows the CCM fills
// from hcloud-go).
//
// # Notes
//
// Amounts are kept as integer micro-units (1e-6 of the currency) while summing, so totals are
// exact for the API's decimal strings, and become JSON numbers only in the input.
package inventory
