package monitoring

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// targetLabels are the labels Prometheus adds to every series it scrapes from a pod (through a
// PodMonitor, a ServiceMonitor or kubernetes_sd relabelling): a selector may match on them
// whatever the metric declares.
var targetLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "pod": true, "container": true, "endpoint": true, "service": true}

// namedMetrics returns every metric name the dashboard and the alert rules name, each with where
// it is named, and the label names their selectors match on, by metric, parsed by promql-check.
func namedMetrics(t *testing.T) (named, matchers map[string][]string) {
	t.Helper()
	exprs, variableMetrics := dashboardExprs(t, loadDashboard(t, readFile(t, dashboardFile)))
	resp := promqlCheck(t, promqlRequest{Rules: string(readFile(t, rulesFile)), Exprs: exprs})
	if len(resp.Errors) > 0 {
		t.Fatalf("expressions that do not parse (see TestPromQLParses): %q", resp.Errors)
	}
	named = map[string][]string{}
	for where, metrics := range resp.Metrics {
		for _, m := range metrics {
			named[m] = append(named[m], where)
		}
	}
	for _, m := range variableMetrics {
		named[m] = append(named[m], "a variable's query")
	}
	for _, wheres := range named {
		slices.Sort(wheres)
	}
	return named, resp.Matchers
}

// TestMetricsExported: every metric the dashboard and the alerts name is declared by a package
// linked into the CCM binary (exportedMetrics).
func TestMetricsExported(t *testing.T) {
	exported := exportedMetrics(t)
	named, _ := namedMetrics(t)
	for m, wheres := range named {
		where := strings.Join(wheres, "; ")
		_, isExported := exported[m]
		switch {
		case m == "":
			t.Errorf("%s: a selector without a metric name", where)
		case isExported:
		default:
			t.Errorf("%s (%s) is not exported: no package linked into %s declares it; fix the name or add the metric", m, where, ccmMain)
		}
	}
}

// TestMetricLabelsExist: every label a selector of the dashboard or the alerts matches on is a
// label its metric declares, or a target label (targetLabels): a misspelt label selects nothing,
// and its panel or alert stays empty without an error anywhere. Every hcloud_ccm_* metric named
// must have its label names found, so the check covers all of this CCM's own.
func TestMetricLabelsExist(t *testing.T) {
	exported := exportedMetrics(t)
	_, matchers := namedMetrics(t)
	for m, labels := range matchers {
		d, ok := exported[m]
		switch {
		case !ok:
			continue // TestMetricsExported reports it
		case !d.labelsKnown && strings.HasPrefix(m, "hcloud_ccm_"):
			t.Errorf("%s: its label names were not found in its declaration", m)
			continue
		case !d.labelsKnown:
			continue
		}
		for _, l := range labels {
			if !d.labels[l] && !targetLabels[l] {
				t.Errorf("%s has no label %q (it has %v): fix the selector", m, l, slices.Sorted(maps.Keys(d.labels)))
			}
		}
	}
}
