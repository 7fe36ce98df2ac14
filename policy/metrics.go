package policy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metric names and labels are part of the operator contract; they MUST not change.
var (
	decisionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "decisions_total",
		Help:           "Policy decisions by action and result (allow, deny, warn, dryrun_deny, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "result"})

	decisionDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "decision_duration_seconds",
		Help:           "Time to decide one mutation, by action.",
		Buckets:        []float64{0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.005, 0.02, 0.1, 1},
		StabilityLevel: metrics.ALPHA,
	}, []string{"action"})

	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "reloads_total",
		Help:           "Policy revisions loaded (result=success) or rejected (result=failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	revisionInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "revision_info",
		Help:           "The policy revision in force (value 1); no series before the first good revision.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"revision"})
)

// Results of a decision, the "result" label of hcloud_ccm_policy_decisions_total.
const (
	resultAllow      = "allow"
	resultDeny       = "deny"
	resultWarn       = "warn"
	resultDryRunDeny = "dryrun_deny"
	resultError      = "error"
)

var registerOnce sync.Once

// registerMetrics registers the policy metrics with the legacy registry the CCM serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(decisionsTotal, decisionDuration, reloadsTotal, revisionInfo)
	})
}
