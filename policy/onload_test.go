package policy_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestEngine_Load_onLoad: OnLoad hears of each revision put in force, not of a rejected one nor
// of a reload of the revision in force.
func TestEngine_Load_onLoad(t *testing.T) {
	var heard []string
	e := policy.NewEngine(policy.Options{OnLoad: func(rev string) { heard = append(heard, rev) }})
	ctx := context.Background()
	first := mustLoad(t, e, files("lb.rego", denyLB31))
	mustLoad(t, e, files("lb.rego", denyLB31)) // the same revision again
	if _, err := e.Load(ctx, files("lb.rego", "package ccm\n\ndeny contains msg if msg := y\n"), policy.Source{Name: "test"}); err == nil {
		t.Fatal("Load(bad) = nil error, want a *LoadError")
	}
	second := mustLoad(t, e, files("lb.rego", denyLB31+"\n# changed\n"))
	if diff := cmp.Diff([]string{first, second}, heard); diff != "" {
		t.Errorf("OnLoad calls (-want +got):\n%s", diff)
	}
}
