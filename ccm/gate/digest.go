package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// Digest returns the digest of what Decide decides for plan and svc under the policy revision in
// force: sha256 over the revision and the JSON of every step's policy input (Inputs, in
// plan.Steps order). Two plans with the same digest are decided alike, whatever the fields of
// the input are: a field added to policy/input is in the digest without any edit here
// (TestDigest_coversEveryInputField).
//
// It is "" when no revision is named (Revision: without a policy nothing is denied) or when the
// input cannot be completed (the namespace labels cannot be read: the decision fails, and a
// failure is not worth remembering). It decides nothing.
func (g Gate) Digest(plan lbplan.Plan, svc *corev1.Service) string {
	rev, ok := g.Revision()
	if !ok {
		return ""
	}
	service, err := g.Service(svc)
	if err != nil {
		return ""
	}
	return inputsDigest(rev, Inputs(plan, g.Cluster, service))
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
