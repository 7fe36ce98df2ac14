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
	// resultRefused is a mutation the executor refused to send because it is not what the
	// policy decided (ErrRefused): a bug of the CCM.
	resultRefused = "refused"
)

// mutationsTotal counts mutations by policy action, operation and result (success, error,
// denied, refused). The name MUST not change: dashboards use it.
var mutationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "hcloud_ccm_mutations_total",
	Help:           "Mutations of Hetzner Cloud resources by policy action, operation and result (success, error, denied, refused: not sent because the request was not what the policy decided).",
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
