package monitoring

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// monitoringDoc is the runbook of the alerts.
const monitoringDoc = "docs/monitoring.md"

// loadRules parses the rule file.
func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, rulesFile), &rf); err != nil {
		t.Fatalf("parse %s: %v", rulesFile, err)
	}
	return rf
}

// alerts returns the alerting rules of rf by name, failing on a name used twice.
func alerts(t *testing.T, rf ruleFile) map[string]rule {
	t.Helper()
	out := map[string]rule{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if _, dup := out[r.Alert]; dup {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			out[r.Alert] = r
		}
	}
	return out
}

// TestAlertsShape: every alert has a severity Alertmanager can route on, a summary and a
// description, waits at least a minute (`for`) so one scrape never pages, and has its runbook
// section in docs/monitoring.md.
func TestAlertsShape(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), monitoringDoc))
	if err != nil {
		t.Fatal(err)
	}
	all := alerts(t, loadRules(t))
	if len(all) == 0 {
		t.Fatal("no alerts")
	}
	for name, r := range all {
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want critical, warning or info", name, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: want the annotations summary and description", name)
		}
		if d, err := time.ParseDuration(r.For); err != nil || d < time.Minute {
			t.Errorf("%s: for %q, want a duration of a minute or more", name, r.For)
		}
		if !strings.Contains(string(doc), "\n### "+name+"\n") {
			t.Errorf("%s: no runbook section \"### %s\" in %s", name, name, monitoringDoc)
		}
	}
}

// TestAlertsPresent: the alerts that docs/monitoring.md (and issue 31) promise are there, and each
// reads the metric it is about.
func TestAlertsPresent(t *testing.T) {
	resp := promqlCheck(t, promqlRequest{Rules: string(readFile(t, rulesFile))})
	tests := []struct {
		topic  string
		alert  string
		metric string
	}{
		{topic: "API budget nearly spent", alert: "HcloudCCMAPIBudgetLow", metric: "hcloud_ccm_api_ratelimit_remaining"},
		{topic: "API budget spent (429)", alert: "HcloudCCMAPIRateLimited", metric: "hcloud_ccm_api_requests_total"},
		{topic: "policy revision rejected", alert: "HcloudCCMPolicyRevisionRejected", metric: "hcloud_ccm_policy_revision_rejected"},
		{topic: "evaluation errors", alert: "HcloudCCMPolicyEvaluationErrors", metric: "hcloud_ccm_policy_decisions_total"},
		{topic: "sustained load balancer reconcile failures", alert: "HcloudCCMLoadBalancerReconcileFailing", metric: "hcloud_ccm_mutations_total"},
		{topic: "sustained route reconcile failures", alert: "HcloudCCMRouteReconcileFailing", metric: "route_controller_route_sync_total"},
		{topic: "plugin failures", alert: "HcloudCCMPluginFailing", metric: "hcloud_ccm_plugin_failures_total"},
		{topic: "requests refused before sending (not what the policy decided)", alert: "HcloudCCMMutationRefused", metric: "hcloud_ccm_mutations_total"},
	}
	for _, tc := range tests {
		t.Run(tc.topic, func(t *testing.T) {
			got, ok := resp.Metrics["alert "+tc.alert]
			if !ok {
				t.Fatalf("no alert %s (or its expression does not parse: %q)", tc.alert, resp.Errors)
			}
			if !slices.Contains(got, tc.metric) {
				t.Errorf("alert %s reads %v, want %s among them", tc.alert, got, tc.metric)
			}
		})
	}
}
