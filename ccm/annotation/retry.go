package annotation

// PolicyRetry is the annotation ccm/requeue sets on a Service to make the service controller
// sync it now (requeue.Annotation; its value says why and when). It is the CCM's bookkeeping,
// not the Service owner's intent: the policy input leaves it out (gate.PolicyService), so
// a retry whose inputs are unchanged is answered by the denial cache without a request, a
// decision or an event (issue 40 §2), and the admission webhook ignores a change of it.
const PolicyRetry = "service.hcloud-policy-ccm.io/policy-retry"
