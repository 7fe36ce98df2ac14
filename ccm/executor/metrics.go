package executor

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of the mutation counter.
const (
	resultSuccess = "success"
	resultError   = "error"
	resultDenied  = "denied"
)

// mutationsTotal counts mutations by policy action, operation and result (success, error,
// denied). The name MUST not change: dashboards use it.
var mutationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "hcloud_ccm_mutations_total",
	Help:           "Mutations of Hetzner Cloud resources by policy action, operation and result (success, error, denied).",
	StabilityLevel: metrics.ALPHA,
}, []string{"action", "operation", "result"})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(mutationsTotal) })
}

func countMutation(action, operation, result string) {
	registerMetrics()
	mutationsTotal.WithLabelValues(action, operation, result).Inc()
}
