package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// PlanDigest returns the digest of what the gate of Run decides for plan and svc under the
// policy revision in force: sha256 over the revision and the JSON of every step's policy input
// (Inputs, in plan.Steps order). Two plans with the same digest are decided alike, whatever the
// fields of the input are: a field added to policy/input is in the digest without any edit
// here (TestPlanDigest_coversEveryInputField).
//
// It is "" when no revision is named (PolicyRevision: without a policy nothing is denied) or
// when the input cannot be completed (the namespace labels cannot be read: the decision fails,
// and a failure is not worth remembering). It decides nothing and sends nothing.
func (x *Executor) PlanDigest(svc *corev1.Service, plan lbplan.Plan) string {
	rev, ok := x.PolicyRevision()
	if !ok {
		return ""
	}
	service, err := x.policyService(svc)
	if err != nil {
		return ""
	}
	return inputsDigest(rev, Inputs(x.withPricing(plan), x.cluster, service))
}

// decidedDigest is the DeniedError.Inputs of a plan whose steps (Inputs of the plan, in order)
// were decided with decisions, the revision rev having been in force before the first one: ""
// unless rev is named and no decision names another revision (a reload during the decisions).
// Deciders that name no revision in their decisions are taken to have decided with rev.
func decidedDigest(rev string, named bool, steps []StepInput, decisions []policy.Decision) string {
	if !named {
		return ""
	}
	for _, d := range decisions {
		if d.Revision != "" && d.Revision != rev {
			return ""
		}
	}
	return inputsDigest(rev, steps)
}

// inputsDigest is the hex sha256 of rev and the JSON of each input of steps, streamed into the
// hash (a plan of many targets has large inputs). encoding/json writes map keys sorted, so
// equal inputs give equal digests.
func inputsDigest(rev string, steps []StepInput) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", rev)
	enc := json.NewEncoder(h)
	for _, st := range steps {
		if err := enc.Encode(st.Input); err != nil { // the input types always encode
			return ""
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
