//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMNodeLabelsFollowServerLabels proves that plugin labels stay right after
// initialisation: the node-labels controller re-applies the node_labels plugin when the
// server's Hetzner labels change, adds and updates the keys it owns, removes owned keys the
// plugin no longer returns, and leaves a label someone else set alone.
func TestCCMNodeLabelsFollowServerLabels(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddServer(hcloudemu.ServerSpec{
		Name: "worker-1", Type: "cx22",
		Labels: map[string]string{"node.hcloud.example/pool": "db", "node.hcloud.example/tier": "gold"},
	})
	if err != nil {
		t.Fatalf("add server: %v", err)
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	// The default API budget keeps the server list for 2 minutes at this size; a budget of
	// 3600/h keeps it for HCLOUD_SERVER_CACHE_MAX_AGE (10s), so the change is seen within the
	// test's minute.
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{args: []string{
		"--plugin-node-labels=" + nodeLabelsPlugin(t),
		"--node-label-resync=1s",
	}, env: []string{"HCLOUD_API_BUDGET_PER_HOUR=3600"}})
	waitInitialised(t, c, ccm, "worker-1", id)
	waitPluginLabels(t, c, "worker-1", map[string]string{
		"node.hcloud.example/pool": "db", "node.hcloud.example/tier": "gold",
		"node.hcloud.example/server-family": "cx", "node.hcloud.example/cpu-arch": "amd64",
	})

	// Someone else labels the node; the controller must never touch that label.
	// A merge patch, not Get+Update: the CCM writes the node at the same time, and an
	// Update on a stale resourceVersion fails with a conflict.
	patch := []byte(`{"metadata":{"labels":{"team.example.com/owner":"ops"}}}`)
	if _, err := c.Client().CoreV1().Nodes().Patch(context.Background(), "worker-1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label the node as someone else: %v", err)
	}

	// The pool label changes and the tier label disappears on the Hetzner server.
	if err := emu.SetServerLabels(id, map[string]string{"node.hcloud.example/pool": "web"}); err != nil {
		t.Fatal(err)
	}
	got := waitPluginLabels(t, c, "worker-1", map[string]string{
		"node.hcloud.example/pool":          "web",
		"node.hcloud.example/server-family": "cx", "node.hcloud.example/cpu-arch": "amd64",
	})
	if got["team.example.com/owner"] != "ops" {
		t.Errorf("the label set by someone else was changed: %v", got)
	}
}

// waitPluginLabels waits until the node's node.hcloud.example/ labels are exactly want and
// returns all its labels.
func waitPluginLabels(t *testing.T, c *harness.Cluster, name string, want map[string]string) map[string]string {
	t.Helper()
	var labels map[string]string
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		node, err := c.Client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		labels = node.Labels
		got := map[string]string{}
		for k, v := range labels {
			if strings.HasPrefix(k, "node.hcloud.example/") {
				got[k] = v
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return false, fmt.Errorf("plugin labels of %s (-want +got):\n%s", name, diff)
		}
		return true, nil
	})
	return labels
}
