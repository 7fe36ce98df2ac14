// Package monitoring holds the checks of the chart's Grafana dashboard
// (deploy/chart/dashboards/hcloud-policy-ccm.json) and alerts
// (deploy/chart/alerts/hcloud-policy-ccm.rules.yaml), all in its tests, run by `make unit`:
//
//   - the chart renders them as documented, off by default (chart_test.go, with the helm binary
//     of `make helm-bin`, found as test/deploy finds it);
//   - every expression parses with Prometheus' own parser, and the rule file loads as
//     Prometheus loads one (promql_test.go, through test/tools/promql, a module of its own so
//     that Prometheus never enters the product's go.mod);
//   - every metric they name is declared by a package linked into the CCM binary
//     (exported_test.go), and every label their selectors match on is one of its metric's (metrics_test.go);
//   - the panels and alerts that docs/monitoring.md promises are there and read the metrics
//     they are about (dashboard_test.go, rules_test.go).
package monitoring
