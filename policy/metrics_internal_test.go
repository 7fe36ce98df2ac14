package policy

import (
	"context"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestMetrics_countDecisionsAndReloads(t *testing.T) {
	ctx := context.Background()
	decisionsOf := func(source, action, result string) float64 {
		t.Helper()
		v, err := testutil.GetCounterMetricValue(decisionsTotal.WithLabelValues(action, result, source))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	decisions := func(action, result string) float64 { return decisionsOf(sourceGate, action, result) }
	timed := func(source, action string) uint64 {
		t.Helper()
		v, err := testutil.GetHistogramMetricCount(decisionDuration.WithLabelValues(action, source))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	reloads := func(result string) float64 {
		t.Helper()
		v, err := testutil.GetCounterMetricValue(reloadsTotal.WithLabelValues(result))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const rules = `package ccm

deny contains "no" if input.load_balancer.type == "lb31"

warn contains "hm" if input.load_balancer.type == "lb21"

deny contains 1 if input.load_balancer.type == "bad"
`
	in := func(typ string) input.Input {
		return input.Input{Action: input.ActionLoadBalancerUpdate, LoadBalancer: &input.LoadBalancer{Type: typ}}
	}
	const a = input.ActionLoadBalancerUpdate
	auditDenyBefore := decisionsOf(sourceAudit, input.ActionLoadBalancerUpdate, resultDeny)
	before := map[string]float64{}
	for _, r := range []string{resultAllow, resultDeny, resultWarn, resultDryRunDeny, resultError} {
		before[r] = decisions(a, r)
	}
	okBefore, failBefore := reloads("success"), reloads("failure")
	timedGateBefore, timedAuditBefore := timed(sourceGate, a), timed(sourceAudit, a)

	enforce := NewEngine(Options{})
	if _, err := enforce.Load(ctx, map[string][]byte{"p.rego": []byte(rules)}, Source{}); err != nil {
		t.Fatal(err)
	}
	if _, err := enforce.Load(ctx, map[string][]byte{"p.rego": []byte("package ccm\n\nx := y\n")}, Source{}); err == nil {
		t.Fatal("bad revision accepted")
	}
	dryrun := NewEngine(Options{Mode: ModeDryRun})
	if _, err := dryrun.Load(ctx, map[string][]byte{"p.rego": []byte(rules)}, Source{}); err != nil {
		t.Fatal(err)
	}
	enforce.Decide(ctx, in("lb11"))
	enforce.Decide(ctx, in("lb31"))
	enforce.Decide(ctx, in("lb21"))
	enforce.Decide(ctx, in("bad"))
	dryrun.Decide(ctx, in("lb31"))
	audited := in("lb31")
	audited.Audit = true
	enforce.Decide(ctx, audited) // counted apart: the gate's deny below grows by 1 only

	for _, r := range []string{resultAllow, resultDeny, resultWarn, resultDryRunDeny, resultError} {
		if got := decisions(a, r) - before[r]; got != 1 {
			t.Errorf("decisions_total{action=%q,result=%q} grew by %v, want 1", a, r, got)
		}
	}
	if got := decisionsOf(sourceAudit, a, resultDeny) - auditDenyBefore; got != 1 {
		t.Errorf("decisions_total{action=%q,result=deny,source=audit} grew by %v, want 1", a, got)
	}
	// decision_duration_seconds is labelled by source like decisions_total: five real
	// requests, one audit decision.
	if got := timed(sourceGate, a) - timedGateBefore; got != 5 {
		t.Errorf("decision_duration_seconds_count{action=%q,source=gate} grew by %v, want 5", a, got)
	}
	if got := timed(sourceAudit, a) - timedAuditBefore; got != 1 {
		t.Errorf("decision_duration_seconds_count{action=%q,source=audit} grew by %v, want 1", a, got)
	}
	if got := reloads("success") - okBefore; got != 2 {
		t.Errorf("reloads_total{result=success} grew by %v, want 2", got)
	}
	if got := reloads("failure") - failBefore; got != 1 {
		t.Errorf("reloads_total{result=failure} grew by %v, want 1", got)
	}
	rev, err := testutil.GetGaugeMetricValue(revisionInfo.WithLabelValues(dryrun.Revision()))
	if err != nil || rev != 1 {
		t.Errorf("revision_info{revision=%q} = %v, %v; want 1", dryrun.Revision(), rev, err)
	}
}

func TestMetrics_servedByTheLegacyRegistry(t *testing.T) {
	NewEngine(Options{}).Decide(context.Background(), input.Input{Action: input.ActionRouteCreate})
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"hcloud_ccm_policy_decisions_total", "hcloud_ccm_policy_decision_duration_seconds"} {
		if !names[want] {
			t.Errorf("metric %s is not in the legacy registry", want)
		}
	}
}

// TestMetrics_countDenialsByCode: each deny message counts once in
// hcloud_ccm_policy_denials_total, by its code ("none" without one), enforced when it blocks.
func TestMetrics_countDenialsByCode(t *testing.T) {
	ctx := context.Background()
	const rules = `package ccm

deny contains {"msg": "too big", "code": "lb_type"} if input.load_balancer.type == "lb31"

deny contains "no code" if input.load_balancer.type == "lb31"

deny contains {"msg": "soon", "code": "rollout", "enforcement": "dryrun"} if input.load_balancer.type == "lb31"
`
	const a = input.ActionLoadBalancerUpdate
	type key struct{ code, enforced, source string }
	var keys []key
	for _, code := range []string{"lb_type", noCode, "rollout"} {
		for _, enforced := range []string{"true", "false"} {
			for _, source := range []string{sourceGate, sourceAudit} {
				keys = append(keys, key{code, enforced, source})
			}
		}
	}
	denials := func() map[key]float64 {
		t.Helper()
		out := map[key]float64{}
		for _, k := range keys {
			v, err := testutil.GetCounterMetricValue(denialsTotal.WithLabelValues(a, k.code, k.enforced, k.source))
			if err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name  string
		mode  Mode
		typ   string
		audit bool
		want  map[key]float64
	}{
		{name: "enforce: the dry-run message is reported, the others block", mode: ModeEnforce, typ: "lb31",
			want: map[key]float64{{"lb_type", "true", sourceGate}: 1, {noCode, "true", sourceGate}: 1, {"rollout", "false", sourceGate}: 1}},
		{name: "dry run: nothing blocks", mode: ModeDryRun, typ: "lb31",
			want: map[key]float64{{"lb_type", "false", sourceGate}: 1, {noCode, "false", sourceGate}: 1, {"rollout", "false", sourceGate}: 1}},
		{name: "audit under enforce: counted apart, nothing blocks", mode: ModeEnforce, typ: "lb31", audit: true,
			want: map[key]float64{{"lb_type", "false", sourceAudit}: 1, {noCode, "false", sourceAudit}: 1, {"rollout", "false", sourceAudit}: 1}},
		{name: "allowed: nothing counted", mode: ModeEnforce, typ: "lb11", want: map[key]float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(Options{Mode: tc.mode})
			if _, err := e.Load(ctx, map[string][]byte{"p.rego": []byte(rules)}, Source{}); err != nil {
				t.Fatal(err)
			}
			before := denials()
			e.Decide(ctx, input.Input{Action: a, LoadBalancer: &input.LoadBalancer{Type: tc.typ}, Audit: tc.audit})
			after := denials()
			for _, k := range keys {
				if got := after[k] - before[k]; got != tc.want[k] {
					t.Errorf("denials_total{code=%q,enforced=%q,source=%q} grew by %v, want %v", k.code, k.enforced, k.source, got, tc.want[k])
				}
			}
		})
	}
}

// TestMetrics_revisionRejected: hcloud_ccm_policy_revision_rejected is 1 while the newest
// revision of the source is rejected, also when the same one comes again, and 0 once the source
// holds a revision that loads or the one in force.
func TestMetrics_revisionRejected(t *testing.T) {
	ctx := context.Background()
	good := map[string][]byte{"p.rego": []byte("package ccm\n\ndeny contains \"no\" if input.load_balancer.type == \"lb31\"\n")}
	other := map[string][]byte{"p.rego": []byte("package ccm\n\ndeny contains \"no\" if input.load_balancer.type == \"lb21\"\n")}
	bad := map[string][]byte{"p.rego": []byte("package ccm\n\nx := y\n")}
	e := NewEngine(Options{})
	steps := []struct {
		name  string
		files map[string][]byte
		want  float64
	}{
		{name: "a good revision", files: good, want: 0},
		{name: "a broken revision", files: bad, want: 1},
		{name: "the revision in force again", files: good, want: 0},
		{name: "the broken revision again (no second event)", files: bad, want: 1},
		{name: "a new good revision", files: other, want: 0},
	}
	for _, s := range steps {
		_, _ = e.Load(ctx, s.files, Source{})
		got, err := testutil.GetGaugeMetricValue(revisionRejected)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want {
			t.Errorf("after %s: revision_rejected = %v, want %v", s.name, got, s.want)
		}
	}
}
