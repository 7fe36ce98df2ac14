//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// taintShutdown is the taint the node-lifecycle controller puts on a NotReady node whose
// instance is shut down (k8s.io/cloud-provider/api TaintNodeShutdown).
const taintShutdown = "node.cloudprovider.kubernetes.io/shutdown"

// TestCCMNodeLifecycle runs the CCM's cloud-node-lifecycle controller (--node-monitor-period=1s
// appended to the Deployment's args, server cache max age 1 s) on initialised nodes whose
// kubelet stopped posting status (Ready=Unknown, written through the status subresource):
//
//   - the server was deleted in the cloud: the Node object is deleted;
//   - the server is powered off: the Node gets the shutdown taint and is kept.
//
// A node that is still Ready is left alone, whatever its server: the controller only checks
// NotReady nodes, so each case first changes the cloud, then the node's readiness.
func TestCCMNodeLifecycle(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)

	type lifecycleCase struct {
		name  string
		cloud func(t *testing.T, id int64) // changes the node's server
		// gone is whether the Node must be deleted; otherwise it must carry taint.
		gone  bool
		taint string
	}
	cases := []lifecycleCase{
		{name: "server deleted", gone: true, cloud: func(t *testing.T, id int64) {
			if err := emu.DeleteServer(id); err != nil {
				t.Fatalf("delete server %d: %v", id, err)
			}
		}},
		{name: "server powered off", taint: taintShutdown, cloud: func(t *testing.T, id int64) {
			if err := emu.SetServerStatus(id, "off"); err != nil {
				t.Fatalf("power off server %d: %v", id, err)
			}
		}},
	}
	ids := map[string]int64{}
	for i := range cases {
		node := fmt.Sprintf("worker-%d", i+1)
		ids[node] = addServer(t, emu, hcloudemu.ServerSpec{Name: node})
		c.CreateNode(t, node, fmt.Sprintf("10.244.%d.0/24", i+1))
	}
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		args: []string{"--node-monitor-period=1s"},
		env:  []string{"HCLOUD_SERVER_CACHE_MAX_AGE=1s"},
	})
	for node, id := range ids {
		waitInitialised(t, c, ccm, node, id)
	}

	ctx := context.Background()
	nodes := c.Client().CoreV1().Nodes()
	for i, tc := range cases {
		node := fmt.Sprintf("worker-%d", i+1)
		t.Run(tc.name, func(t *testing.T) {
			tc.cloud(t, ids[node])
			setNodeReady(t, c, node, corev1.ConditionUnknown)
			waitCCM(t, ccm, time.Minute, func() (bool, error) {
				n, err := nodes.Get(ctx, node, metav1.GetOptions{})
				if tc.gone {
					if apierrors.IsNotFound(err) {
						return true, nil
					}
					if err != nil {
						return false, err
					}
					return false, fmt.Errorf("node %s still exists (taints %v)", node, n.Spec.Taints)
				}
				if err != nil {
					t.Fatalf("node %s: %v (want it kept)", node, err)
				}
				if !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == tc.taint }) {
					return false, fmt.Errorf("node %s taints %v, want %s", node, n.Spec.Taints, tc.taint)
				}
				return true, nil
			})
		})
	}

	// The powered-off node's server still exists: the node is not deleted in later monitor
	// periods either.
	if _, err := nodes.Get(ctx, "worker-2", metav1.GetOptions{}); err != nil {
		t.Errorf("node worker-2 of the powered-off server: %v, want it kept", err)
	}
}

// setNodeReady sets the node's Ready condition to status through the status subresource, as
// a kubelet (Ready=False) or the node-lifecycle controller of kube-controller-manager for a
// silent kubelet (Ready=Unknown) would.
func setNodeReady(t *testing.T, c *harness.Cluster, name string, status corev1.ConditionStatus) {
	t.Helper()
	nodes := c.Client().CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(node.Status.Conditions, func(cond corev1.NodeCondition) bool { return cond.Type == corev1.NodeReady })
		if i < 0 {
			return fmt.Errorf("node %s has no Ready condition", name)
		}
		now := metav1.Now()
		node.Status.Conditions[i].Status = status
		node.Status.Conditions[i].Reason = "NodeStatusUnknown"
		node.Status.Conditions[i].Message = "Kubelet stopped posting node status."
		node.Status.Conditions[i].LastTransitionTime = now
		_, err = nodes.UpdateStatus(context.Background(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set node %s Ready=%s: %v", name, status, err)
	}
}
