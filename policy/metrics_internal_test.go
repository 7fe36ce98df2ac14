package policy

import (
	"context"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestMetrics_countDecisionsAndReloads(t *testing.T) {
	ctx := context.Background()
	decisions := func(action, result string) float64 {
		t.Helper()
		v, err := testutil.GetCounterMetricValue(decisionsTotal.WithLabelValues(action, result))
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
	in := func(typ string) Input {
		return Input{Action: ActionLoadBalancerUpdate, LoadBalancer: &LoadBalancer{Type: typ}}
	}
	const a = ActionLoadBalancerUpdate
	before := map[string]float64{}
	for _, r := range []string{resultAllow, resultDeny, resultWarn, resultDryRunDeny, resultError} {
		before[r] = decisions(a, r)
	}
	okBefore, failBefore := reloads("success"), reloads("failure")

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

	for _, r := range []string{resultAllow, resultDeny, resultWarn, resultDryRunDeny, resultError} {
		if got := decisions(a, r) - before[r]; got != 1 {
			t.Errorf("decisions_total{action=%q,result=%q} grew by %v, want 1", a, r, got)
		}
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
	NewEngine(Options{}).Decide(context.Background(), Input{Action: ActionRouteCreate})
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
