//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestChartPolicyReports: policyReports.enabled (off by default) renders the PolicyReport and
// ClusterPolicyReport CRDs (TestCCMAuditReportsExistingLoadBalancers installs them in a real
// API server); policy.auditInterval renders --policy-audit-interval, which args may not set;
// the CCM's ClusterRole, in the chart and in deploy/, always allows it to manage the reports.
func TestChartPolicyReports(t *testing.T) {
	t.Parallel()
	const crds = "CustomResourceDefinition//policyreports.wgpolicyk8s.io CustomResourceDefinition//clusterpolicyreports.wgpolicyk8s.io"
	isCRD := func(k string) bool { return strings.HasPrefix(k, "CustomResourceDefinition/") }

	off := renderChart(t, []string{officialDefaults})
	if slices.ContainsFunc(off.kinds, isCRD) {
		t.Errorf("CRDs rendered by default: %v", off.kinds)
	}
	if slices.ContainsFunc(off.deployment.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--policy-audit-interval") }) {
		t.Errorf("--policy-audit-interval rendered without policy.auditInterval")
	}

	on := renderChart(t, []string{officialDefaults}, "--set", "policyReports.enabled=true", "--set", "policy.auditInterval=2m")
	if got := strings.Join(slices.DeleteFunc(slices.Clone(on.kinds), func(k string) bool { return !isCRD(k) }), " "); got != crds {
		t.Errorf("CRDs rendered with policyReports.enabled=true: %q, want %q", got, crds)
	}
	if !slices.Contains(on.deployment.Spec.Template.Spec.Containers[0].Args, "--policy-audit-interval=2m") {
		t.Errorf("args %v lack --policy-audit-interval=2m", on.deployment.Spec.Template.Spec.Containers[0].Args)
	}

	for what, r := range map[string]rendered{"chart": off, "deploy/": render(t, deployDir)} {
		role := r.clusterRoles["system:hcloud-policy-ccm"]
		if role == nil || !slices.ContainsFunc(role.Rules, managesReports) {
			t.Errorf("%s: the ClusterRole system:hcloud-policy-ccm does not allow managing policyreports and clusterpolicyreports", what)
		}
	}

	_, err := harness.RunHelm(t, "template", chartRelease, chartDir, "--namespace", ccmNamespace,
		"--values", officialDefaults, "--set", "args.policy-audit-interval=1m")
	if want := "args.policy-audit-interval: the chart sets --policy-audit-interval; use policy.auditInterval instead"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("helm template --set args.policy-audit-interval=1m: %v, want an error containing %q", err, want)
	}
}

// managesReports reports whether r allows every verb the audit's report writer uses on both
// report resources.
func managesReports(r rbacv1.PolicyRule) bool {
	if !slices.Equal(r.APIGroups, []string{"wgpolicyk8s.io"}) {
		return false
	}
	for _, res := range []string{"policyreports", "clusterpolicyreports"} {
		if !slices.Contains(r.Resources, res) {
			return false
		}
	}
	for _, v := range []string{"get", "list", "create", "update", "delete"} {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}
