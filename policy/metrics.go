package policy

import (
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"strconv"
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
		Help:           "Policy decisions by action, result (allow, deny, warn, dryrun_deny, error) and source (gate: a mutation the CCM was about to send or a Service the webhook reviewed; audit: the policy audit judging what exists, never blocking).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "result", "source"})

	decisionDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "decision_duration_seconds",
		Help:           "Time to decide one mutation, by action and source (gate: a mutation the CCM was about to send or a Service the webhook reviewed; audit: the policy audit judging what exists).",
		Buckets:        []float64{0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.005, 0.02, 0.1, 1},
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "source"})

	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "reloads_total",
		Help:           "Policy revisions loaded (result=success) or rejected (result=failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	denialsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "denials_total",
		Help:           "Deny messages of policy decisions by action, code (the message's code; \"none\" without one) enforced (\"true\": the message blocked the mutation; \"false\": reported only, in dry run or by the audit) and source (gate, audit).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "code", "enforced", "source"})

	revisionRejected = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "hcloud_ccm",
		Subsystem:      "policy",
		Name:           "revision_rejected",
		Help:           "1 while the newest revision of the policy source is rejected (the previous one stays in force), 0 once the source holds a revision that loads or the one in force.",
		StabilityLevel: metrics.ALPHA,
	})

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

// Sources of a decision, the "source" label of hcloud_ccm_policy_decisions_total,
// hcloud_ccm_policy_denials_total and hcloud_ccm_policy_decision_duration_seconds.
const (
	sourceGate  = "gate"  // a real request: the executor's gate or the admission webhook
	sourceAudit = "audit" // the policy audit (Input.Audit): reported, never enforced
)

// sourceOf is the source label of a decision on in.
func sourceOf(in input.Input) string {
	if in.Audit {
		return sourceAudit
	}
	return sourceGate
}

var registerOnce sync.Once

// registerMetrics registers the policy metrics with the legacy registry the CCM serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(decisionsTotal, decisionDuration, denialsTotal, reloadsTotal, revisionRejected, revisionInfo)
	})
}

// noCode is the code label of hcloud_ccm_policy_denials_total for a deny message without a code.
const noCode = "none"

// countDecision counts d, the decision on in with result, in hcloud_ccm_policy_decisions_total
// and each of its deny messages in hcloud_ccm_policy_denials_total: by its code, enforced only
// when it blocks a mutation (never for the audit's decisions, which send nothing whatever the
// mode), both labelled with the decision's source. The codes come from the operator's
// policies, so the label's values are as many as the codes those use.
func countDecision(in input.Input, d Decision, result string) {
	source := sourceOf(in)
	decisionsTotal.WithLabelValues(in.Action, result, source).Inc()
	for _, m := range d.Deny {
		code := m.Code
		if code == "" {
			code = noCode
		}
		enforced := !in.Audit && !d.Allowed && m.Enforcement != EnforcementDryRun
		denialsTotal.WithLabelValues(in.Action, code, strconv.FormatBool(enforced), source).Inc()
	}
}
