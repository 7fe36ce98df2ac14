package lbplan

// SendOrder returns the indices of p.Steps() in the order the CCM sends their requests
// (Requests): the steps' own order, except that a managed certificate created with the load
// balancer is sent before the create, so that the listener using it rides along in the create
// (its step comes after the create's, whose load balancer is its view). It is pure. `plan`
// (ccm/ciplan) lists the steps in this order, as the executor sends them;
// TestSendOrder_IsRequestsOrder checks it against Requests.
func (p Plan) SendOrder() []int {
	steps := p.Steps()
	create := len(steps) > 0 && steps[0].Mutation.Operation() == OpCreate
	var first, rest []int
	for i, st := range steps {
		if create && isCertificate(st.Mutation) {
			first = append(first, i)
			continue
		}
		rest = append(rest, i)
	}
	return append(first, rest...)
}
