package e2e

import "testing"

// TestChartPoliciesInSync checks that deploy/chart/policies holds exactly the policies of
// examples/policies (the same selection as deploy/policies) with the same content: the chart
// renders its default policy ConfigMap from these copies, because helm reads only files inside
// the chart. It needs no cluster and runs with the unit tests.
func TestChartPoliciesInSync(t *testing.T) {
	const src, dst = "../../examples/policies", "../../deploy/chart/policies"
	const fix = "run deploy/chart/policies/sync.sh and commit the result"

	checkPolicyCopy(t, src, dst, fix)
}
