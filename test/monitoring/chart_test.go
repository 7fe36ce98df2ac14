package monitoring

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/test/deploy"
)

// prometheusRuleAPI is the --api-versions entry that tells helm the PrometheusRule CRD is
// installed.
const prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"

// prometheusRule is a monitoring.coreos.com/v1 PrometheusRule.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            ruleFile          `json:"spec"`
}

// renderChart runs `helm template hccm deploy/chart --namespace kube-system` with args and returns
// the rendered documents by "Kind/namespace/name", each as YAML.
func renderChart(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var head struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("parse a rendered document: %v\n%s", err, doc)
		}
		if head.Kind != "" {
			docs[head.Kind+"/"+head.Metadata.Namespace+"/"+head.Metadata.Name] = doc
		}
	}
	return docs
}

// helmTemplate runs `helm template` of the chart with args.
func helmTemplate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"template", "hccm", "deploy/chart", "--namespace", "kube-system"}, args...)
	out, err := deploy.Helm(t.Context(), helmBin(t), repoRoot(t), full...)
	return string(out), err
}

// decode parses the rendered document key into obj, failing when it is missing.
func decode(t *testing.T, docs map[string]string, key string, obj any) {
	t.Helper()
	doc, ok := docs[key]
	if !ok {
		t.Fatalf("%s not rendered; rendered: %v", key, keys(docs))
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("parse %s: %v", key, err)
	}
}

func keys(docs map[string]string) []string {
	out := make([]string, 0, len(docs))
	for k := range maps.Keys(docs) {
		out = append(out, k)
	}
	return out
}

// TestChartMonitoringOffByDefault: with the default values (and the PrometheusRule CRD
// installed) the chart renders neither the dashboard nor the rules.
func TestChartMonitoringOffByDefault(t *testing.T) {
	for key, doc := range renderChart(t, "--api-versions", prometheusRuleAPI) {
		if strings.HasPrefix(key, "PrometheusRule/") || strings.Contains(doc, "grafana_dashboard") {
			t.Errorf("%s rendered with the default values", key)
		}
	}
}

// TestChartDashboard: grafanaDashboard.enabled renders a ConfigMap with the sidecar's label
// (configurable), in the chosen namespace, whose one key is the dashboard file, byte for byte.
func TestChartDashboard(t *testing.T) {
	want := strings.TrimRight(string(readFile(t, dashboardFile)), "\n")
	tests := []struct {
		name       string
		set        []string
		key        string
		wantLabels map[string]string
		wantAnnots map[string]string
	}{
		{
			name:       "the defaults: kube-prometheus-stack's label, the release namespace",
			set:        []string{"grafanaDashboard.enabled=true"},
			key:        "ConfigMap/kube-system/hcloud-cloud-controller-manager-dashboard",
			wantLabels: map[string]string{"grafana_dashboard": "1"},
		},
		{
			name: "another label, namespace, labels and annotations",
			set: []string{"grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring",
				"grafanaDashboard.label=dashboards", "grafanaDashboard.labelValue=ccm",
				"grafanaDashboard.labels.team=infra", "grafanaDashboard.annotations.grafana_folder=Kubernetes",
				"nameOverride=ccm"},
			key:        "ConfigMap/monitoring/ccm-dashboard",
			wantLabels: map[string]string{"dashboards": "ccm", "team": "infra"},
			wantAnnots: map[string]string{"grafana_folder": "Kubernetes"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cm corev1.ConfigMap
			decode(t, renderChart(t, "--set", strings.Join(tc.set, ",")), tc.key, &cm)
			for k, v := range tc.wantLabels {
				if cm.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, cm.Labels[k], v, cm.Labels)
				}
			}
			if diff := cmp.Diff(tc.wantAnnots, cm.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if len(cm.Data) != 1 {
				t.Errorf("data keys %v, want only hcloud-policy-ccm.json", keys(cm.Data))
			}
			if got := cm.Data["hcloud-policy-ccm.json"]; got != want {
				t.Errorf("data[hcloud-policy-ccm.json] differs from %s (%d bytes, want %d)", dashboardFile, len(got), len(want))
			}
		})
	}
}

// TestChartPrometheusRule: prometheusRule.enabled renders, when the CRD is installed, a
// PrometheusRule whose groups are the rule file's, with alertLabels added to every alert (an
// alert's own labels win); without the CRD nothing.
func TestChartPrometheusRule(t *testing.T) {
	const key = "PrometheusRule/kube-system/hcloud-cloud-controller-manager"
	set := "prometheusRule.enabled=true,prometheusRule.labels.release=kps,prometheusRule.alertLabels.team=infra,prometheusRule.alertLabels.severity=page"

	if _, ok := renderChart(t, "--set", set)[key]; ok {
		t.Errorf("%s rendered without its CRD", key)
	}

	var pr prometheusRule
	decode(t, renderChart(t, "--set", set, "--api-versions", prometheusRuleAPI), key, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("apiVersion %q, kind %q", pr.APIVersion, pr.Kind)
	}
	if pr.Metadata.Labels["release"] != "kps" {
		t.Errorf("labels %v, want release=kps from prometheusRule.labels", pr.Metadata.Labels)
	}
	want := loadRules(t)
	for gi := range want.Groups {
		for ri := range want.Groups[gi].Rules {
			r := &want.Groups[gi].Rules[ri]
			r.Labels["team"] = "infra"
		}
	}
	if diff := cmp.Diff(want, pr.Spec); diff != "" {
		t.Errorf("spec differs from %s with alertLabels (-want +got):\n%s", rulesFile, diff)
	}
}

// TestChartMonitoringRefusesBadValues: what cannot work fails the render, naming the value and
// the fix.
func TestChartMonitoringRefusesBadValues(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want string
	}{
		{name: "a dashboard without metrics", set: "grafanaDashboard.enabled=true,monitoring.enabled=false", want: "grafanaDashboard.enabled needs monitoring.enabled=true"},
		{name: "alerts without metrics", set: "prometheusRule.enabled=true,monitoring.enabled=false", want: "prometheusRule.enabled needs monitoring.enabled=true"},
		{name: "a dashboard without the sidecar's label", set: "grafanaDashboard.enabled=true,grafanaDashboard.label=", want: "grafanaDashboard.label is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmTemplate(t, "--set", tc.set, "--api-versions", prometheusRuleAPI)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: error %v, want one containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestChartMonitoringLints: `helm lint --strict` passes with both on.
func TestChartMonitoringLints(t *testing.T) {
	if _, err := deploy.Helm(t.Context(), helmBin(t), repoRoot(t), "lint", "--strict", "deploy/chart", "--namespace", "kube-system",
		"--set", "grafanaDashboard.enabled=true,prometheusRule.enabled=true"); err != nil {
		t.Fatal(err)
	}
}
