//go:build e2e

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestCCMPolicyLoadedEventAtStartup proves that the revision the CCM loads from the policy
// ConfigMap at start-up gets its Normal event PolicyLoaded on the ConfigMap, as docs/policy.md
// promises for every accepted revision ("An accepted revision gives a Normal event PolicyLoaded
// naming the revision").
//
// The first revision is loaded by ccm.New, inside the upstream cloudInitializer, before the
// controller manager starts its event broadcaster; the CCM's own broadcaster, started before
// ccm.New, is what makes this event reach the API.
func TestCCMPolicyLoadedEventAtStartup(t *testing.T) {
	t.Parallel()
	c, _, ccm := startOneWorker(t, ccmRun{})

	var rev string
	waitCCM(t, ccm, 30*time.Second, func() (bool, error) {
		rev, _ = policyRevision(ccm)
		return rev != "", nil
	})
	// waitEvent polls for a minute: the event has all the time it needs to arrive.
	waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeNormal, "PolicyLoaded", "Policy revision "+rev+" loaded")
}
