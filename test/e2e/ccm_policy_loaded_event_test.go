//go:build e2e

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
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
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{})
	waitInitialised(t, c, ccm, "worker-1", id)

	var rev string
	waitCCM(t, ccm, 30*time.Second, func() (bool, error) {
		rev, _ = policyRevision(ccm)
		return rev != "", nil
	})
	// waitEvent polls for a minute: the event has all the time it needs to arrive.
	waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeNormal, "PolicyLoaded", "Policy revision "+rev+" loaded")
}
