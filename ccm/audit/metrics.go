package audit

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The audit's metrics. Their names and labels MUST not change: the chart's dashboard and
// alerts use them.
var (
	violationsGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_policy_audit_violations",
		Help:           "Violations found by the last policy audit, by action (deny: enforcing would refuse; warn) and the rule's code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "code"})
	lastRunGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_policy_audit_last_run_timestamp_seconds",
		Help:           "Unix time the last policy audit started.",
		StabilityLevel: metrics.ALPHA,
	})
	durationGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_policy_audit_duration_seconds",
		Help:           "Duration of the last policy audit.",
		StabilityLevel: metrics.ALPHA,
	})
	loadBalancersGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_policy_audit_load_balancers",
		Help:           "Load balancers judged by the last policy audit.",
		StabilityLevel: metrics.ALPHA,
	})
	routesGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_policy_audit_routes",
		Help:           "Routes judged by the last policy audit.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(violationsGauge, lastRunGauge, durationGauge, loadBalancersGauge, routesGauge)
	})
}

// Actions of the violations metric.
const (
	actionDeny = "deny"
	actionWarn = "warn"
)

// observe sets the metrics to the audit s.
func observe(s Summary) {
	violationsGauge.Reset()
	for _, v := range s.Violations {
		action := actionWarn
		if v.Result == ResultFail {
			action = actionDeny
		}
		violationsGauge.WithLabelValues(action, v.Code).Inc()
	}
	lastRunGauge.Set(float64(s.Started.UnixNano()) / 1e9)
	durationGauge.Set(s.Duration.Seconds())
	loadBalancersGauge.Set(float64(s.LoadBalancers))
	routesGauge.Set(float64(s.Routes))
}
