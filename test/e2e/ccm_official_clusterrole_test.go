//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// officialDefaultRender is the official chart rendered with its default values (fixture).
const officialDefaultRender = "../deploy/testdata/official/rendered/default.yaml"

// namespacesForbiddenLog is the start-up log line that names the missing permission.
const namespacesForbiddenLog = "may not list and watch namespaces (RBAC)"

// TestCCMOfficialClusterRoleDryRun is issue 31 item 9: the chart with rbac.create=false and a
// copy of the official ClusterRole and binding (from the official chart's render), as an
// operator who manages RBAC by hand with the official rules. The CCM may not read namespaces.
// In the chart's dry run nothing is blocked: two Services get their load balancers, each
// decision's evaluation error is reported as PolicyDryRunDenied, never PolicyDenied. The
// missing permission is named once: one Warning event NamespacesForbidden (count 1) on the
// policy ConfigMap and one log line (besides the event broadcaster's echo of the event), however
// many syncs follow, and no refused namespace
// list or watch in the log (no namespace informer runs).
func TestCCMOfficialClusterRoleDryRun(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	dir := t.TempDir()
	out := harness.Helm(t, "template", chartRelease, chartDir, "--namespace", ccmNamespace, "--values", officialDefaults, "--set", "rbac.create=false")
	ours := parseManifests(t, "helm template --set rbac.create=false", out)
	for _, key := range ours.kinds {
		if strings.Contains(key, "Role") {
			t.Fatalf("rbac.create=false renders %s", key)
		}
	}
	official := parseManifests(t, officialDefaultRender, readFile(t, officialDefaultRender))
	rbac := []string{
		official.docs["ClusterRole//system:hcloud-cloud-controller-manager"],
		official.docs["ClusterRoleBinding//system:hcloud-cloud-controller-manager:restricted"],
	}
	for _, doc := range rbac {
		if doc == "" {
			t.Fatalf("the official render lacks its ClusterRole or binding: %v", official.kinds)
		}
	}
	manifest := filepath.Join(dir, "install.yaml")
	if err := os.WriteFile(manifest, []byte(out+"\n---\n"+strings.Join(rbac, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ApplyFile(t, manifest)

	emu, endpoint := hcloudemu.NewTestServer(t)
	id := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{deployment: ours.deployment, env: lbEnv,
		// The official ClusterRole has no rule for the audit's PolicyReports: the audit says so
		// once (TestCCMAuditGroupLimitLowered runs without the CRDs) and reports by the other
		// channels.
		forbidden: []string{"policyreports.wgpolicyk8s.io"}})
	waitInitialised(t, c, ccm, "worker-1", id)

	hasTarget := func(lb schema.LoadBalancer) error {
		if len(targetServers(lb)) != 1 {
			return errNoTarget
		}
		return nil
	}
	for _, name := range []string{"web", "api"} {
		svc := createService(t, c, loadBalancerService("default", name))
		waitLB(t, ccm, emu, svc.UID, time.Minute, hasTarget)
		waitEvent(t, c, ccm, "default", name, corev1.EventTypeWarning, "PolicyDryRunDenied", `cannot read the labels of namespace "default"`)
		if evs, err := events(c, "default", name, "PolicyDenied"); err != nil || len(evs) != 0 {
			t.Errorf("%s: %d PolicyDenied events in dry run (%v), want none", name, len(evs), err)
		}
	}

	ev := waitEvent(t, c, ccm, ccmNamespace, policyConfigMap, corev1.EventTypeWarning, "NamespacesForbidden", "Grant get, list and watch on namespaces")
	if evs, err := events(c, ccmNamespace, policyConfigMap, "NamespacesForbidden"); err != nil || len(evs) != 1 || evs[0].Count > 1 {
		t.Errorf("NamespacesForbidden events %+v (%v), want one with count 1", evs, err)
	}
	t.Logf("event: %s", ev.Message)
	logs := ccm.Logs()
	var lines []string // the event broadcaster echoes each event ("Event occurred"): not counted
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, namespacesForbiddenLog) && !strings.Contains(line, `"Event occurred"`) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 {
		t.Errorf("%d log lines contain %q, want 1:\n%s", len(lines), namespacesForbiddenLog, strings.Join(lines, "\n"))
	}
	if strings.Contains(logs, `"namespaces" in API group "" at the cluster scope`) {
		t.Error("the log has refused namespace lists or watches: a namespace informer runs")
	}
}

// errNoTarget is the condition of a load balancer without its server target yet.
var errNoTarget = errorString("no server target yet")

type errorString string

func (e errorString) Error() string { return string(e) }
